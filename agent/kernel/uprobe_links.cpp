#include "agent/kernel/uprobe_links.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "common/unique_fd.h"

namespace sonde::agent {
namespace {

// Linux 6.6 uapi, absent from the libbpf (1.1) and kernel headers the agent builds against:
// enum bpf_attach_type's BPF_TRACE_UPROBE_MULTI, and union bpf_attr's link_create with its
// uprobe_multi member (checked against this kernel's BTF: bpftool btf dump ... format c).
constexpr uint32_t kBpfTraceUprobeMulti = 48;
struct LinkCreateUprobeMulti {
  uint32_t prog_fd;
  uint32_t target_fd;
  uint32_t attach_type;
  uint32_t flags;
  uint64_t path;
  uint64_t offsets;
  uint64_t ref_ctr_offsets;
  uint64_t cookies;
  uint32_t cnt;
  uint32_t uprobe_flags;  // BPF_F_UPROBE_MULTI_RETURN: 0, entry probes
  uint32_t pid;           // 0: every process
  uint32_t pad;
};
static_assert(sizeof(LinkCreateUprobeMulti) == 64);

constexpr uint32_t kUprobeMultiReturn = 1;  // BPF_F_UPROBE_MULTI_RETURN

int create_uprobe_multi_link(int prog_fd, const char* path, const uint64_t* offsets,
                             const uint64_t* cookies, uint32_t count, uint32_t uprobe_flags = 0,
                             uint32_t pid = 0) {
  LinkCreateUprobeMulti attr{};
  attr.prog_fd = static_cast<uint32_t>(prog_fd);
  attr.attach_type = kBpfTraceUprobeMulti;
  attr.path = reinterpret_cast<uintptr_t>(path);
  attr.offsets = reinterpret_cast<uintptr_t>(offsets);
  attr.cookies = reinterpret_cast<uintptr_t>(cookies);
  attr.cnt = count;
  attr.uprobe_flags = uprobe_flags;
  attr.pid = pid;
  return static_cast<int>(syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof attr));
}

// A kernel with uprobe_multi links resolves the path before anything else and refuses one that
// is not a regular file with EBADF; a kernel without them refuses the attach type (EINVAL) or
// the program (a KPROBE program with that expected attach type) first. Nothing gets attached.
UprobeLinkSupport probe_uprobe_link_support() {
  const bpf_insn return_zero[] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
  };
  LIBBPF_OPTS(bpf_prog_load_opts, opts,
              .expected_attach_type = static_cast<bpf_attach_type>(kBpfTraceUprobeMulti));
  UniqueFd prog(bpf_prog_load(BPF_PROG_TYPE_KPROBE, "sonde_umulti", "GPL", return_zero,
                              sizeof return_zero / sizeof return_zero[0], &opts));
  if (!prog.valid()) {
    return {UprobeLinkKind::kSingle,
            errno_error("uprobe_multi program refused (needs Linux 6.6)", errno).message()};
  }
  const uint64_t offset = 0;
  UniqueFd link(create_uprobe_multi_link(prog.get(), "/", &offset, nullptr, 1));
  const int err = errno;
  if (!link.valid() && err == EBADF) return {UprobeLinkKind::kMulti, "uprobe_multi links"};
  if (link.valid()) {
    return {UprobeLinkKind::kSingle, "uprobe_multi links refused: a link to / was created"};
  }
  return {UprobeLinkKind::kSingle,
          errno_error("uprobe_multi links refused (needs Linux 6.6)", err).message()};
}

// A uprobe_multi link: closing its descriptor detaches every site.
class MultiLink final : public Attachment {
 public:
  explicit MultiLink(UniqueFd fd) : fd_(std::move(fd)) {}

 private:
  UniqueFd fd_;
};

// One link per site, detached together.
class LinkGroup final : public Attachment {
 public:
  explicit LinkGroup(std::vector<std::unique_ptr<Attachment>> links) : links_(std::move(links)) {}

 private:
  std::vector<std::unique_ptr<Attachment>> links_;
};

std::string site_name(bpf_program* program, const std::string& path, uint64_t file_offset) {
  char offset[32];
  (void)std::snprintf(offset, sizeof offset, "0x%llx",
                      static_cast<unsigned long long>(file_offset));
  return std::string(bpf_program__name(program)) + " to " + path + "+" + offset;
}

}  // namespace

const UprobeLinkSupport& uprobe_link_support() {
  static const UprobeLinkSupport support = probe_uprobe_link_support();
  return support;
}

const char* uprobe_link_kind_name(UprobeLinkKind kind) {
  return kind == UprobeLinkKind::kMulti ? "uprobe_multi" : "single";
}

void prepare_uprobe_program(bpf_program* program, UprobeLinkKind kind) {
  if (kind == UprobeLinkKind::kMulti) {
    bpf_program__set_expected_attach_type(program,
                                          static_cast<bpf_attach_type>(kBpfTraceUprobeMulti));
  }
}

Result<std::unique_ptr<Attachment>> attach_uprobes(bpf_program* program, UprobeLinkKind kind,
                                                   const std::string& path,
                                                   std::span<const UprobeSite> sites,
                                                   UprobeFires fires, pid_t pid) {
  const bool on_return = fires == UprobeFires::kOnReturn;
  if (sites.empty())
    return Error("attach uprobe " + std::string(bpf_program__name(program)) + " to " + path +
                 ": no sites");
  if (kind == UprobeLinkKind::kMulti) {
    std::vector<uint64_t> offsets, cookies;
    for (const auto& s : sites) {
      offsets.push_back(s.file_offset);
      cookies.push_back(s.cookie);
    }
    UniqueFd fd(create_uprobe_multi_link(bpf_program__fd(program), path.c_str(), offsets.data(),
                                         cookies.data(), static_cast<uint32_t>(sites.size()),
                                         on_return ? kUprobeMultiReturn : 0,
                                         pid > 0 ? static_cast<uint32_t>(pid) : 0));
    if (!fd.valid()) {
      const int err = errno;
      return errno_error("attach uprobe_multi " + site_name(program, path, sites[0].file_offset) +
                             " and " + std::to_string(sites.size() - 1) + " more sites",
                         err);
    }
    return std::unique_ptr<Attachment>(new MultiLink(std::move(fd)));
  }
  std::vector<std::unique_ptr<Attachment>> links;
  for (const auto& s : sites) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = s.cookie, .retprobe = on_return);
    bpf_link* link = bpf_program__attach_uprobe_opts(program, pid > 0 ? pid : -1, path.c_str(),
                                                     s.file_offset, &opts);
    if (!link) {
      const int err = errno;
      return errno_error("attach uprobe " + site_name(program, path, s.file_offset), err);
    }
    links.push_back(std::make_unique<BpfLink>(link));
  }
  return std::unique_ptr<Attachment>(new LinkGroup(std::move(links)));
}

size_t uprobe_link_fds(UprobeLinkKind kind, size_t sites) {
  // A perf-event uprobe holds its perf event's descriptor and, with BPF perf links (5.15), the
  // link's.
  return kind == UprobeLinkKind::kMulti ? 1 : 2 * sites;
}

}  // namespace sonde::agent
