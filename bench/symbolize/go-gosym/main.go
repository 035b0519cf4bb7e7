// Go's debug/gosym on the same binary and addresses as symbolize_bench: table build time,
// PCToLine (function + file + line) ns/lookup and heap allocations per lookup. Standard library
// only.
package main

import (
	"debug/elf"
	"debug/gosym"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"time"
)

func main() {
	// -addrs prints the benchmark's addresses instead, for `go tool addr2line`.
	printAddrs := len(os.Args) == 3 && os.Args[1] == "-addrs"
	if len(os.Args) != 2 && !printAddrs {
		fmt.Fprintln(os.Stderr, "usage: gosym-bench [-addrs] BINARY")
		os.Exit(2)
	}
	f, err := elf.Open(os.Args[len(os.Args)-1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pclntab, err := f.Section(".gopclntab").Data()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	text := f.Section(".text").Addr

	start := time.Now()
	table, err := gosym.NewTable(nil, gosym.NewLineTable(pclntab, text))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := time.Since(start)

	lo := table.Funcs[0].Entry
	hi := table.Funcs[len(table.Funcs)-1].End
	rng := rand.New(rand.NewSource(1))
	pcs := make([]uint64, 10000)
	for i := range pcs {
		pcs[i] = lo + uint64(rng.Int63n(int64(hi-lo)))
	}

	if printAddrs {
		for _, pc := range pcs {
			fmt.Printf("0x%x\n", pc)
		}
		return
	}

	const rounds = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start = time.Now()
	found := 0
	for r := 0; r < rounds; r++ {
		for _, pc := range pcs {
			if file, line, fn := table.PCToLine(pc); fn != nil && file != "" && line > 0 {
				found++
			}
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	n := float64(rounds * len(pcs))
	fmt.Printf("debug/gosym: functions=%d build_ms=%.1f ns_per_lookup=%.0f allocs_per_lookup=%.2f found=%d\n",
		len(table.Funcs), float64(build.Microseconds())/1000, float64(elapsed.Nanoseconds())/n,
		float64(after.Mallocs-before.Mallocs)/n, found)
}
