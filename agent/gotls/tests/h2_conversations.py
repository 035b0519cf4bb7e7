#!/usr/bin/python3
"""HTTP/2 connections between a real client and a real server (Debian's python3-h2), in memory,
for http2_test. Usage: h2_conversations.py <scenario>.

Prints the bytes each side sent, in the order they were sent, and what each stream was:
    chunk <c|s> <time ns> <hex>      (c: sent by the client)
    expect <grpc 0|1> <method> <status> <grpc code> <reset 0|1> <duration ns>
Times are a counter: each chunk is 1000 ns after the previous one; a stream's duration runs from
the chunk holding its request's HEADERS to the chunk holding the end of its response (END_STREAM
or RST_STREAM/GOAWAY). `method` is enum sonde_http_method (bpf/gotls/gotls.h). Deterministic.
"""
import random
import sys

import h2.config
import h2.connection
import h2.events
import h2.settings

# enum sonde_http_method
METHODS = {b"GET": 1, b"POST": 2, b"PUT": 3, b"DELETE": 4, b"HEAD": 5, b"PATCH": 6,
           b"OPTIONS": 7}


class Conversation:
    def __init__(self, push=False):
        self.client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        self.t = 0
        self.pending = {"c": [], "s": []}  # (stream, "start"|"end") waiting for the next chunk
        self.start = {}
        self.end = {}
        self.streams = {}  # stream id -> [grpc, method, status, grpc code, reset]
        self.client.local_settings = h2.settings.Settings(
            client=True, initial_values={h2.settings.SettingCodes.ENABLE_PUSH: int(push)})
        self.client.initiate_connection()
        self.server.initiate_connection()
        self.server.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 10000})
        self.flush()

    def deliver(self, side, data):
        receiver = self.server if side == "c" else self.client
        for event in receiver.receive_data(data):
            if isinstance(event, h2.events.DataReceived):
                receiver.acknowledge_received_data(event.flow_controlled_length, event.stream_id)

    def flush(self):
        """Moves bytes both ways until neither side has anything to send; one chunk per send."""
        moved = True
        while moved:
            moved = False
            for side, conn in (("c", self.client), ("s", self.server)):
                data = conn.data_to_send()
                if not data:
                    continue
                moved = True
                self.t += 1000
                print("chunk", side, self.t, data.hex())
                for stream, what in self.pending[side]:
                    (self.start if what == "start" else self.end)[stream] = self.t
                self.pending[side] = []
                self.deliver(side, data)

    def request(self, method, path=b"/", grpc=False, body=None, extra=()):
        sid = self.client.get_next_available_stream_id()
        headers = [(b":method", method), (b":scheme", b"https"), (b":path", path),
                   (b":authority", b"api.example.test")]
        if grpc:
            headers += [(b"content-type", b"application/grpc+proto"), (b"te", b"trailers")]
        headers += list(extra)
        self.client.send_headers(sid, headers, end_stream=body is None)
        if body is not None:
            for i, part in enumerate(body):
                self.client.send_data(sid, part, end_stream=i == len(body) - 1)
        self.pending["c"].append((sid, "start"))
        self.streams[sid] = [int(grpc), METHODS.get(method, 0), 0, -1, 0]
        return sid

    def respond(self, sid, status, body=(), informational=(), trailers=None, extra=()):
        for code in informational:
            self.server.send_headers(sid, [(b":status", code)])
        headers = [(b":status", b"%d" % status)] + list(extra)
        ends = not body and trailers is None
        self.server.send_headers(sid, headers, end_stream=ends)
        for i, part in enumerate(body):
            self.server.send_data(sid, part, end_stream=trailers is None and i == len(body) - 1)
        if trailers is not None:
            self.server.send_headers(sid, trailers, end_stream=True)
        self.pending["s"].append((sid, "end"))
        self.streams[sid][2] = status

    def grpc_status(self, sid, code):
        if self.streams[sid][0]:
            self.streams[sid][3] = code

    def reset(self, sid, by_client):
        if by_client:
            self.client.reset_stream(sid)
        else:
            self.server.reset_stream(sid)
        self.pending["c" if by_client else "s"].append((sid, "end"))
        self.streams[sid][4] = 1

    def print_expectations(self):
        for sid, (grpc, method, status, code, reset) in sorted(self.streams.items()):
            if sid not in self.end:
                continue  # still open: no Exchange
            print("expect", grpc, method, status, code, reset, self.end[sid] - self.start[sid])


def concurrent(rng):
    """200 requests in flight at once on one connection, answered in random order: every method,
    1xx before the final status, bodies in several DATA frames, HEADERS-only responses, and
    header table size changes both ways."""
    conv = Conversation()
    methods = [b"GET", b"POST", b"PUT", b"DELETE", b"HEAD", b"PATCH", b"OPTIONS", b"PROPFIND"]
    sids = []
    for i in range(200):
        method = methods[i % len(methods)]
        body = [b"x" * rng.randrange(1, 300) for _ in range(rng.randrange(3))] or None
        extra = [(b"x-request-id", b"%032x" % rng.getrandbits(128)),
                 (b"cookie", b"session=%x" % rng.getrandbits(64))]
        sids.append(conv.request(method, b"/items/%d" % i, body=body, extra=extra))
        if i % 20 == 19:  # lets the server open its flow-control window again
            conv.flush()
    conv.server.update_settings({h2.settings.SettingCodes.HEADER_TABLE_SIZE: 256})
    conv.client.update_settings({h2.settings.SettingCodes.HEADER_TABLE_SIZE: 16384})
    conv.flush()
    rng.shuffle(sids)
    statuses = [200, 201, 204, 301, 304, 400, 404, 418, 500, 503]
    for n, sid in enumerate(sids):
        status = rng.choice(statuses)
        informational = [b"100"] if n % 7 == 0 else []
        no_body = status in (204, 304) or conv.streams[sid][1] == METHODS[b"HEAD"]
        body = [] if no_body else [b"y" * rng.randrange(1, 1000)
                                                for _ in range(rng.randrange(1, 4))]
        conv.respond(sid, status, body=body, informational=informational,
                     extra=[(b"date", b"Wed, 02 Dec 2026 22:%02d:%02d GMT" % (n % 60, n % 59)),
                            (b"x-trace", b"%x" % rng.getrandbits(96))])
        if n % 5 == 4 or rng.random() < 0.3:
            conv.flush()
    conv.flush()
    return conv


def grpc(rng):
    """gRPC: unary calls with trailers, Trailers-Only answers, server and client streaming,
    grpc-status out of range or absent, interleaved on one connection."""
    conv = Conversation()
    open_calls = []
    answered = 0
    for i in range(120):
        kind = i % 6
        if kind == 3:  # client streaming: many request messages
            body = [b"\0\0\0\0\x05hello" for _ in range(rng.randrange(2, 20))]
        else:
            body = [b"\0\0\0\0\x03abc"]
        sid = conv.request(b"POST", b"/shop.Cart/Op%d" % kind, grpc=True, body=body)
        open_calls.append((sid, kind))
        if rng.random() < 0.5:
            continue
        conv.flush()  # the server answers only requests it has received
        while open_calls and rng.random() < 0.6:
            sid, kind = open_calls.pop(rng.randrange(len(open_calls)))
            code = answered % 17  # every code, whatever order the calls end in
            answered += 1
            head = [(b"content-type", b"application/grpc")]
            if kind == 0 or kind == 3:  # unary / client streaming
                conv.respond(sid, 200, body=[b"\0\0\0\0\x02ok"], extra=head,
                             trailers=[(b"grpc-status", b"%d" % code),
                                       (b"grpc-message", b"m%d" % code)])
                conv.grpc_status(sid, code)
            elif kind == 1:  # Trailers-Only
                conv.respond(sid, 200, extra=head + [(b"grpc-status", b"%d" % code)])
                conv.grpc_status(sid, code)
            elif kind == 2:  # server streaming: many response messages, one call
                conv.respond(sid, 200, extra=head,
                             body=[b"\0\0\0\0\x04item" for _ in range(rng.randrange(2, 30))],
                             trailers=[(b"grpc-status", b"%d" % code)])
                conv.grpc_status(sid, code)
            elif kind == 4:  # a grpc-status outside 0..16: counted, code -1
                conv.respond(sid, 200, extra=head, body=[b"\0\0\0\0\x00"],
                             trailers=[(b"grpc-status", b"%d" % rng.choice([17, 99, 255]))])
            else:  # no grpc-status at all: the response ends with DATA
                conv.respond(sid, 200, extra=head, body=[b"\0\0\0\0\x00"])
            if rng.random() < 0.5:
                conv.flush()
    conv.flush()
    for sid, _ in open_calls:
        conv.respond(sid, 503, extra=[(b"content-type", b"application/grpc")],
                     trailers=[(b"grpc-status", b"14")])
        conv.grpc_status(sid, 14)
    conv.flush()
    return conv


def resets(rng):
    """RST_STREAM from either side, before and after the response's HEADERS, then a GOAWAY from
    the server that ends the streams above its last-stream-id."""
    conv = Conversation()
    sids = [conv.request(rng.choice([b"GET", b"POST"]), b"/r/%d" % i) for i in range(30)]
    conv.flush()
    for n, sid in enumerate(sids[:20]):
        if n % 4 == 0:
            conv.reset(sid, by_client=True)  # before any response: status 0
        elif n % 4 == 1:
            conv.reset(sid, by_client=False)
        elif n % 4 == 2:  # after the response's HEADERS: the status stays
            conv.server.send_headers(sid, [(b":status", b"200")])
            conv.streams[sid][2] = 200
            conv.flush()
            conv.reset(sid, by_client=n % 8 == 2)
        else:
            conv.respond(sid, 200, body=[b"ok"])
        conv.flush()
    # The server processed up to sids[24]; the five streams after it end with the GOAWAY.
    for sid in sids[20:25]:
        conv.respond(sid, 202)
    conv.server.close_connection(last_stream_id=sids[24])
    for sid in sids[25:]:
        conv.pending["s"].append((sid, "end"))
        conv.streams[sid][4] = 1
    conv.flush()
    return conv


def continuation(rng):
    """Header blocks larger than one frame (16 KiB): HEADERS + CONTINUATION both ways."""
    conv = Conversation()
    for i in range(6):
        big = [(b"x-big-%d" % k, b"%x" % rng.getrandbits(8000)) for k in range(12)]
        sid = conv.request(b"GET", b"/big/%d" % i, extra=big)
        conv.flush()
        conv.respond(sid, 200 + i, body=[b"z"], extra=big)
        conv.flush()
    return conv


def push(rng):
    """Server push: promised streams and their responses change the HPACK state, not the counts."""
    conv = Conversation(push=True)
    for i in range(10):
        sid = conv.request(b"GET", b"/page/%d" % i)
        conv.flush()
        for k in range(2):
            promised = conv.server.get_next_available_stream_id()
            conv.server.push_stream(sid, promised, [
                (b":method", b"GET"), (b":scheme", b"https"), (b":path", b"/style-%d-%d.css" % (i, k)),
                (b":authority", b"api.example.test"), (b"x-pushed", b"%x" % rng.getrandbits(64))])
            conv.server.send_headers(promised, [(b":status", b"200"),
                                                (b"content-type", b"text/css")])
            conv.server.send_data(promised, b"body{}", end_stream=True)
        conv.respond(sid, rng.choice([200, 404]), body=[b"<html>"])
        conv.flush()
    return conv


SCENARIOS = {"concurrent": concurrent, "grpc": grpc, "resets": resets,
             "continuation": continuation, "push": push}


def main():
    name = sys.argv[1]
    conv = SCENARIOS[name](random.Random(name))
    conv.print_expectations()


if __name__ == "__main__":
    sys.exit(main())
