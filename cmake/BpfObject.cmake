# sonde_bpf_object(SOURCE) turns a BPF program, bpf/<folder>/NAME.bpf.c, into NAME.bpf.o,
# NAME.skel.h and an INTERFACE target NAME_skel that consumers link to get the skeleton header
# (`#include "NAME.skel.h"`) and the repository root (`#include "bpf/<folder>/<header>.h"`) on
# their include path. The program itself includes its folder's headers by name and shared ones
# from bpf/ (`pidns.bpf.h`, `stacks/sample.bpf.h`). bpf/CMakeLists.txt calls it for every
# bpf/*/*.bpf.c.
# vmlinux.h is checked in per target architecture (bpf/vmlinux/<arch>/, made from a pinned
# Debian kernel's BTF by scripts/gen-vmlinux-h.sh): the build never reads the build machine's
# kernel, and CO-RE relocates the programs to each node's kernel when they load.

find_program(BPF_CLANG clang REQUIRED)
find_program(BPFTOOL bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)

if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(SONDE_BPF_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(SONDE_BPF_ARCH arm64)
else()
  message(FATAL_ERROR "sonde BPF: unsupported target architecture ${CMAKE_SYSTEM_PROCESSOR}")
endif()
set(SONDE_VMLINUX_DIR ${CMAKE_SOURCE_DIR}/bpf/vmlinux/${SONDE_BPF_ARCH})

set(SONDE_BPF_GEN_DIR ${CMAKE_BINARY_DIR}/bpf-gen)
file(MAKE_DIRECTORY ${SONDE_BPF_GEN_DIR})

function(sonde_bpf_object src)
  get_filename_component(dir ${src} DIRECTORY)
  get_filename_component(name ${src} NAME)
  string(REGEX REPLACE "\\.bpf\\.c$" "" name ${name})
  set(obj ${SONDE_BPF_GEN_DIR}/${name}.bpf.o)
  set(skel ${SONDE_BPF_GEN_DIR}/${name}.skel.h)
  # Any header under bpf/ (a program may include another folder's), but not vmlinux/.
  file(GLOB bpf_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/bpf/*.h ${CMAKE_SOURCE_DIR}/bpf/*/*.h)
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${BPF_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_${SONDE_BPF_ARCH}
            -Wall -Werror -I${SONDE_VMLINUX_DIR} -I${dir} -I${CMAKE_SOURCE_DIR}/bpf
            -c ${src} -o ${obj}
    DEPENDS ${src} ${bpf_headers} ${SONDE_VMLINUX_DIR}/vmlinux.h
    COMMENT "BPF ${name}.bpf.c"
    VERBATIM)
  add_custom_command(
    OUTPUT ${skel}
    # Generated code is not linted (clang-tidy's analyzer misreads libbpf's error paths).
    COMMAND sh -c "{ echo '// NOLINTBEGIN'; '${BPFTOOL}' gen skeleton '${obj}' name ${name}_bpf; echo '// NOLINTEND'; } > '${skel}'"
    DEPENDS ${obj}
    COMMENT "BPF skeleton ${name}.skel.h"
    VERBATIM)
  add_custom_target(${name}_skel_gen DEPENDS ${skel})
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_skel_gen)
  target_include_directories(${name}_skel INTERFACE ${SONDE_BPF_GEN_DIR} ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name}_skel INTERFACE PkgConfig::LIBBPF)
endfunction()
