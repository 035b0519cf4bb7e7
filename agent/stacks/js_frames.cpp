#include "agent/stacks/js_frames.h"

#include <charconv>
#include <iterator>

#include "common/log.h"

namespace sonde::agent::stacks {
namespace {

std::string hex(uint64_t v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, 16);
  if (ec != std::errc()) return "0x?";
  return "0x" + std::string(buf, end);
}

// Whether a symbolized user frame runs JavaScript (or a bytecode handler on its behalf).
bool runs_javascript(const Location& loc) {
  if (loc.module == "[jit]") return true;
  return !loc.lines.empty() && loc.lines.back().function.starts_with("Builtins_");
}

// Whether the only name a [jit] frame has is the symbolizer's "module+offset" fallback.
bool unnamed_jit(const Location& loc) {
  return loc.module == "[jit]" &&
         (loc.lines.empty() || loc.lines.front().function.starts_with("[jit]+"));
}

}  // namespace

std::optional<V8FrameSlots> JsFrames::learn(pid_t pid, uint64_t started) {
  if (auto it = processes_.find(pid); it != processes_.end()) {
    if (it->second->start_time == started) return std::nullopt;
    erase(it->second);
  }
  if (processes_.size() >= kMaxProcesses) erase(std::prev(lru_.end()));
  Process p;
  p.pid = pid;
  p.start_time = started;
  std::optional<V8FrameSlots> watch;
  auto layout = v8::read_process_v8_layout(proc_root_, pid);
  if (layout.ok()) {
    p.status = "supported";
    p.memory = std::make_unique<v8::ProcessMemory>(pid);
    p.namer = std::make_unique<v8::V8Namer>(*layout, *p.memory);
    watch = V8FrameSlots{layout->fp_function, layout->fp_context_or_frame_type,
                         layout->js_function_shared - layout->heap_object_tag};
  } else if (std::string reason = v8::unsupported_reason(layout.error());
             reason != "unsupported: no v8dbg symbols") {
    // The label keeps the fixed reason; the details (paths, values the binary chose) go to the
    // log, once per process.
    log::info("cpu profiles: JavaScript frames of a node process stay unnamed",
              {{"pid", std::to_string(pid)}, {"error", layout.error().message()}});
    p.status = std::move(reason);
  }
  lru_.push_front(std::move(p));
  processes_[pid] = lru_.begin();
  return watch;
}

void JsFrames::forget(pid_t pid) {
  if (auto it = processes_.find(pid); it != processes_.end()) erase(it->second);
}

void JsFrames::erase(Lru::iterator it) {
  if (it->namer) cache_bytes_ -= it->namer->cache_bytes();
  processes_.erase(it->pid);
  lru_.erase(it);
}

void JsFrames::fit_budget() {
  // The most recently used process (the one just named) is emptied last.
  for (auto it = lru_.rbegin(); cache_bytes_ > cache_budget_ && it != lru_.rend(); ++it) {
    if (!it->namer || it->namer->cache_bytes() == 0) continue;
    cache_bytes_ -= it->namer->cache_bytes();
    it->namer->clear_caches();
    ++cache_clears_;
  }
}

JsFrames::Counts JsFrames::name(const RawSample& s, std::vector<Location>& stack) {
  Counts counts;
  if (s.v8.empty()) return counts;
  auto it = processes_.find(static_cast<pid_t>(s.pid));
  if (it == processes_.end() || !it->second->namer) return counts;
  v8::V8Namer& namer = *it->second->namer;
  const size_t user_at = s.kernel.size();
  if (stack.size() != user_at + s.user.size()) return counts;
  lru_.splice(lru_.begin(), lru_, it->second);
  const size_t cached_before = namer.cache_bytes();
  for (size_t i = 0; i < s.v8.size() && i < s.user.size(); ++i) {
    const V8Frame& f = s.v8[i];
    if (s.user[i] != f.pc) break;  // the walks parted: no frame below is trusted
    Location& loc = stack[user_at + i];
    if (!runs_javascript(loc)) continue;
    if (namer.layout().is_smi(f.context_or_type)) continue;  // a typed frame: not JavaScript
    auto js = namer.name(f.function, f.context_or_type, f.shared);
    if (!js) {
      ++counts.unnamed;
      if (unnamed_jit(loc)) loc.lines = {Line{"[js] " + hex(f.pc), "", 0}};
      continue;
    }
    ++counts.named;
    loc.lines = {Line{js->function, js->script, js->line}};
  }
  cache_bytes_ = cache_bytes_ - cached_before + namer.cache_bytes();
  if (cache_bytes_ > cache_budget_) fit_budget();
  return counts;
}

std::map<std::string, uint64_t> JsFrames::node_processes() const {
  std::map<std::string, uint64_t> out;
  for (const Process& p : lru_) {
    if (!p.status.empty()) ++out[p.status];
  }
  return out;
}

v8::V8Namer::Stats JsFrames::stats() const {
  v8::V8Namer::Stats sum;
  for (const Process& p : lru_) {
    if (!p.namer) continue;
    const auto& s = p.namer->stats();
    sum.named += s.named;
    sum.cache_hits += s.cache_hits;
    sum.typed_frame += s.typed_frame;
    sum.not_function += s.not_function;
    sum.inconsistent += s.inconsistent;
    sum.moved += s.moved;
    sum.over_budget += s.over_budget;
    sum.no_line += s.no_line;
  }
  return sum;
}

}  // namespace sonde::agent::stacks
