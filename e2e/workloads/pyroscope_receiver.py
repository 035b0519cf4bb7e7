#!/usr/bin/env python3
"""A stand-in for a Pyroscope server's ingest endpoint, for e2e tests.

Accepts POST <prefix>/ingest with the query parameters Pyroscope reads (name, from, until,
format, sampleRate, spyName) and a multipart/form-data body whose `profile` field is a gzipped
pprof. Each accepted push is written to OUT_DIR as N.pb.gz with N.json holding the query; any
other request, or a push missing a part, is answered 400 and logged, so a test sees the agent's
mistakes as failed pushes. Prints "listening PORT" once ready.

usage: pyroscope_receiver.py OUT_DIR PREFIX
"""
import email.parser
import email.policy
import gzip
import http.server
import json
import os
import sys
import urllib.parse

out_dir, prefix = sys.argv[1], sys.argv[2]
count = 0


class Handler(http.server.BaseHTTPRequestHandler):
    def refuse(self, why):
        sys.stderr.write(f"refused {self.path}: {why}\n")
        self.send_response(400)
        self.end_headers()

    def do_POST(self):
        global count
        url = urllib.parse.urlsplit(self.path)
        if url.path != prefix + "/ingest":
            return self.refuse("not the ingest path")
        query = dict(urllib.parse.parse_qsl(url.query))
        for key in ("name", "from", "until", "format", "sampleRate", "spyName"):
            if key not in query:
                return self.refuse(f"no {key}")
        if query["format"] != "pprof":
            return self.refuse("format is not pprof")
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + self.headers.get("Content-Type", "").encode() + b"\r\n\r\n" + body)
        profile = None
        for part in message.iter_parts():
            if part.get_param("name", header="content-disposition") == "profile":
                profile = part.get_payload(decode=True)
        if not profile:
            return self.refuse("no profile part")
        try:
            gzip.decompress(profile)
        except OSError as e:
            return self.refuse(f"profile is not gzip: {e}")
        count += 1
        with open(os.path.join(out_dir, f"{count}.pb.gz"), "wb") as f:
            f.write(profile)
        with open(os.path.join(out_dir, f"{count}.json"), "w") as f:
            json.dump(query, f)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("listening", server.server_address[1], flush=True)
server.serve_forever()
