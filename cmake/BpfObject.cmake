# sonde_bpf_object(NAME) turns bpf/NAME.bpf.c into NAME.bpf.o, NAME.skel.h and an INTERFACE
# target NAME_skel that consumers link to get the skeleton header on their include path.
# The CO-RE vmlinux.h is generated once per build tree from the running kernel's BTF, or taken
# from SONDE_VMLINUX_BTF when building for other kernels.

find_program(BPF_CLANG clang REQUIRED)
find_program(BPFTOOL bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)
set(SONDE_VMLINUX_BTF /sys/kernel/btf/vmlinux CACHE FILEPATH "BTF used to generate vmlinux.h")

execute_process(COMMAND uname -m OUTPUT_VARIABLE _sonde_uname_m OUTPUT_STRIP_TRAILING_WHITESPACE)
if(_sonde_uname_m STREQUAL "x86_64")
  set(SONDE_BPF_ARCH x86)
elseif(_sonde_uname_m STREQUAL "aarch64")
  set(SONDE_BPF_ARCH arm64)
else()
  message(FATAL_ERROR "sonde BPF: unsupported architecture ${_sonde_uname_m}")
endif()

set(SONDE_BPF_GEN_DIR ${CMAKE_BINARY_DIR}/bpf-gen)
file(MAKE_DIRECTORY ${SONDE_BPF_GEN_DIR})
add_custom_command(
  OUTPUT ${SONDE_BPF_GEN_DIR}/vmlinux.h
  COMMAND ${BPFTOOL} btf dump file ${SONDE_VMLINUX_BTF} format c > ${SONDE_BPF_GEN_DIR}/vmlinux.h
  COMMENT "Generating vmlinux.h from ${SONDE_VMLINUX_BTF}"
  VERBATIM)
add_custom_target(sonde_vmlinux_h DEPENDS ${SONDE_BPF_GEN_DIR}/vmlinux.h)

function(sonde_bpf_object name)
  set(src ${CMAKE_CURRENT_SOURCE_DIR}/${name}.bpf.c)
  set(obj ${SONDE_BPF_GEN_DIR}/${name}.bpf.o)
  set(skel ${SONDE_BPF_GEN_DIR}/${name}.skel.h)
  file(GLOB bpf_headers ${CMAKE_CURRENT_SOURCE_DIR}/*.h)
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${BPF_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_${SONDE_BPF_ARCH}
            -Wall -Werror -I${SONDE_BPF_GEN_DIR} -I${CMAKE_CURRENT_SOURCE_DIR}
            -c ${src} -o ${obj}
    DEPENDS ${src} ${bpf_headers} ${SONDE_BPF_GEN_DIR}/vmlinux.h
    COMMENT "BPF ${name}.bpf.c"
    VERBATIM)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${BPFTOOL} gen skeleton ${obj} name ${name}_bpf > ${skel}
    DEPENDS ${obj}
    COMMENT "BPF skeleton ${name}.skel.h"
    VERBATIM)
  add_custom_target(${name}_skel_gen DEPENDS ${skel})
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_skel_gen)
  target_include_directories(${name}_skel INTERFACE ${SONDE_BPF_GEN_DIR} ${CMAKE_SOURCE_DIR}/bpf)
  target_link_libraries(${name}_skel INTERFACE PkgConfig::LIBBPF)
endfunction()
