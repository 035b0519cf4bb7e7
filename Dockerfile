# syntax=docker/dockerfile:1
# One image with sonde-agent and sonde-operator (the chart runs each with its own command and
# security context). The build stage installs exactly the package list `make deps` installs.

FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/debian-packages.txt scripts/
RUN scripts/install-deps.sh
COPY . .
# vmlinux.h comes from the build machine's kernel BTF; CO-RE relocates it on every node.
RUN make build BUILD=/out

FROM debian:12-slim
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      libbpf1 libelf1 zlib1g libcpprest2.10 libyaml-cpp0.7 libprometheus-cpp-core1.0 \
      libprometheus-cpp-pull1.0 libzydis4.0 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/*

COPY --from=build /out/bin/sonde-agent /out/bin/sonde-operator /usr/bin/
# Non-root by default, as the operator runs. The agent's DaemonSet runs it as uid 0 with only
# the capabilities it needs (BPF, PERFMON, SYS_PTRACE, DAC_READ_SEARCH; see the chart).
USER 65532:65532
ENTRYPOINT ["/usr/bin/sonde-agent"]
