# syntax=docker/dockerfile:1
# Builds sonde-agent and sonde-operator; `--target agent` / `--target operator` pick the image.
# The build stage installs exactly the package list `make deps` installs.

FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/debian-packages.txt scripts/
RUN scripts/install-deps.sh
COPY . .
# vmlinux.h comes from the build machine's kernel BTF; CO-RE relocates it on every node.
RUN make build BUILD=/out

FROM debian:12-slim AS runtime-base
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      libbpf1 libelf1 zlib1g libcpprest2.10 libyaml-cpp0.7 libprometheus-cpp-core1.0 \
      libprometheus-cpp-pull1.0 libzydis4.0 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# The agent needs kernel capabilities (granted by the chart: BPF, PERFMON, SYS_PTRACE,
# DAC_READ_SEARCH, ...) and the host's /proc; it runs as root inside its container only so
# that file capabilities are not needed, with every other capability dropped by the chart.
FROM runtime-base AS agent
COPY --from=build /out/bin/sonde-agent /usr/bin/sonde-agent
ENTRYPOINT ["/usr/bin/sonde-agent"]

# The operator needs no privileges at all.
FROM runtime-base AS operator
COPY --from=build /out/bin/sonde-operator /usr/bin/sonde-operator
USER 65532:65532
ENTRYPOINT ["/usr/bin/sonde-operator"]
