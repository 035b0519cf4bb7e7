# One image with sonde-agent and sonde-operator: `make image` builds it with podman or docker
# (tag localhost/sonde:<chart appVersion>), `make image-test` runs it the way the chart does.
# No registry is needed beyond the two Debian base images, which scripts/image-base.sh can make
# locally; no BuildKit frontend image is pulled (no `# syntax=` line).

FROM debian:12 AS build
COPY scripts/image-build-packages.txt /tmp/
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      $(sed -e 's/#.*//' /tmp/image-build-packages.txt) >/dev/null \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what compiling reads, so editing scripts, charts or docs keeps the compiled layer.
COPY CMakeLists.txt ./
COPY cmake cmake
COPY bpf bpf
COPY common common
COPY agent agent
COPY operator operator
COPY scripts/split-debug.sh scripts/gen-crds.py scripts/
# bpf/vmlinux/<arch>/vmlinux.h is checked in, so the build does not read this machine's BTF.
# The compiler cache lives in a build cache mount (podman, and docker with BuildKit): kept on the
# building machine between builds, never in an image; a cold one costs nothing extra.
RUN --mount=type=cache,id=sonde-ccache,target=/ccache \
    export CCACHE_DIR=/ccache \
 && cmake -S . -B /out -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSONDE_BUILD_TESTS=OFF \
 && cmake --build /out -j "$(nproc)" \
 && scripts/split-debug.sh /out/debug /out/bin/sonde-agent /out/bin/sonde-operator \
      /out/lib/sonde/libssl.so /out/lib/sonde/libcrypto.so

# Debug information of the image's binaries, by build id (`make image` copies it out to
# build/image/debug): point gdb's debug-file-directory or a debuginfod server at it.
FROM scratch AS debug
COPY --from=build /out/debug/ /usr/lib/debug/

FROM debian:12-slim
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libbpf1 libelf1 zlib1g libcpprest2.10 libyaml-cpp0.7 libprometheus-cpp-core1.0 \
      libprometheus-cpp-pull1.0 libzydis4.0 libcivetweb1 libprotobuf32 libssl3 ca-certificates >/dev/null \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/debconf/*-old /var/log/* \
 && groupadd --gid 65532 sonde \
 && useradd --uid 65532 --gid 65532 --home-dir /home/sonde --create-home \
      --shell /usr/sbin/nologin sonde
COPY --from=build /out/bin/sonde-agent /out/bin/sonde-operator /usr/bin/
# What civetweb loads to serve TLS (agent/metrics/civetweb_openssl/): lib/sonde/ beside bin/.
COPY --from=build /out/lib/sonde/libssl.so /out/lib/sonde/libcrypto.so /usr/lib/sonde/
COPY scripts/image/sonde /usr/bin/sonde
# The default user is root because the agent needs its capabilities effective (the chart runs
# it as uid 0 with every capability dropped but BPF, PERFMON, SYS_PTRACE and DAC_READ_SEARCH);
# `sonde operator` switches to uid 65532, and the chart runs the operator as 65532.
USER 0:0
ENTRYPOINT ["/usr/bin/sonde"]
