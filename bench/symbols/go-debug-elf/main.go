// The approach of today's Go agents, for comparison with sonde's symbol engine: for every new
// pid, open the binary through that pid's path with debug/elf, read Symbols() and
// DynamicSymbols(), and look for the probe targets. Standard library only. It does less work
// than sonde (no return-site decoding), so the comparison favours it.
package main

import (
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"
)

var names = []string{"uv__io_poll", "uv__stream_io", "uv__async_io", "uv__poll_io",
	"uv__server_io", "uv__udp_io"}

type target struct {
	name  string
	found bool
	addr  uint64
	size  uint64
}

// lookup does what one pid costs: open, read both tables, find the names, close. The symbol
// slices are returned so main can measure what an agent caching the parsed tables would hold.
func lookup(path string) ([]target, []elf.Symbol, []elf.Symbol, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil, nil, nil, err
	}
	dyn, err := f.DynamicSymbols()
	if err != nil && err != elf.ErrNoSymbols {
		return nil, nil, nil, err
	}
	out := make([]target, len(names))
	for i, n := range names {
		out[i].name = n
	}
	for _, table := range [][]elf.Symbol{syms, dyn} {
		for _, s := range table {
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Section == elf.SHN_UNDEF {
				continue
			}
			for i := range out {
				if !out[i].found && s.Name == out[i].name {
					out[i] = target{s.Name, true, s.Value, s.Size}
				}
			}
		}
	}
	return out, syms, dyn, nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func main() {
	binary := flag.String("binary", "/usr/bin/node", "binary to resolve the libuv names in")
	pids := flag.Int("pids", 200, "simulated pids, each reaching the binary through its own path")
	flag.Parse()

	dir, err := os.MkdirTemp("", "go-debug-elf-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	paths := make([]string, *pids)
	for i := range paths {
		// Stands in for /proc/<pid>/root/usr/bin/node: a distinct path string per pid.
		p := filepath.Join(dir, fmt.Sprint(1000+i), "root", "node")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := os.Symlink(*binary, p); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		paths[i] = p
	}

	runtime.GC()
	var before, after runtime.MemStats
	durations := make([]time.Duration, 0, *pids)
	allocs := make([]uint64, 0, *pids)
	var peakHeap uint64
	var kept []elf.Symbol
	var keptDyn []elf.Symbol
	var result []target
	start := time.Now()
	for _, p := range paths {
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		r, syms, dyn, err := lookup(p)
		d := time.Since(t0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		runtime.ReadMemStats(&after)
		if after.HeapAlloc > peakHeap {
			peakHeap = after.HeapAlloc
		}
		durations = append(durations, d)
		allocs = append(allocs, after.TotalAlloc-before.TotalAlloc)
		result, kept, keptDyn = r, syms, dyn
	}
	total := time.Since(start)

	runtime.GC()
	var held runtime.MemStats
	runtime.ReadMemStats(&held)
	symbolCount := len(kept) + len(keptDyn)
	runtime.KeepAlive(kept)
	runtime.KeepAlive(keptDyn)
	kept, keptDyn = nil, nil
	runtime.GC()
	var dropped runtime.MemStats
	runtime.ReadMemStats(&dropped)

	sorted := append([]time.Duration(nil), durations...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	var sum time.Duration
	var allocSum uint64
	for i := range durations {
		sum += durations[i]
		allocSum += allocs[i]
	}
	n := len(durations)
	fmt.Printf("go debug/elf: %s, %d symbols, %d pids through distinct paths (%s)\n", *binary,
		symbolCount, n, runtime.Version())
	for _, t := range result {
		fmt.Printf("  %-14s found=%v addr=%#x size=%d\n", t.name, t.found, t.addr, t.size)
	}
	fmt.Printf("first pid (cold)          %10.2f ms  allocated %8.2f MiB\n",
		float64(durations[0].Microseconds())/1000, mib(allocs[0]))
	fmt.Printf("per pid, mean             %10.2f ms  allocated %8.2f MiB\n",
		float64(sum.Microseconds())/1000/float64(n), mib(allocSum/uint64(n)))
	fmt.Printf("per pid, median           %10.2f ms\n", float64(sorted[n/2].Microseconds())/1000)
	fmt.Printf("all %d pids               %10.2f ms  allocated %8.2f MiB (parses: %d)\n", n,
		float64(total.Microseconds())/1000, mib(allocSum), n)
	fmt.Printf("peak heap in use          %10.2f MiB\n", mib(peakHeap))
	fmt.Printf("retained if tables kept   %10.2f MiB (heap after GC holding one binary's symbols)\n",
		mib(held.HeapAlloc))
	fmt.Printf("heap after dropping them  %10.2f MiB\n", mib(dropped.HeapAlloc))
}
