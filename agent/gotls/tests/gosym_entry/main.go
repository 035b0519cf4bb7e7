// gosym_entry BINARY NAME...: prints "0x<entry> NAME" for each Go function NAME, read with Go's
// own debug/gosym from the binary's .gopclntab, for go_releases_test's ground truth. It reads
// the layouts the Go that builds it knows (Debian's 1.19: Go 1.2 to 1.19 tables); on a newer
// table it exits 3 and says so, and on a name it does not find it prints nothing for it.
package main

import (
	"debug/elf"
	"debug/gosym"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: gosym_entry BINARY NAME...")
		os.Exit(2)
	}
	f, err := elf.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	section := f.Section(".gopclntab")
	text := f.Section(".text")
	if section == nil || text == nil {
		fmt.Fprintln(os.Stderr, "no .gopclntab or .text section")
		os.Exit(1)
	}
	data, err := section.Data()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	table, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		fmt.Fprintln(os.Stderr, "debug/gosym cannot read this table:", err)
		os.Exit(3)
	}
	if len(table.Funcs) == 0 {
		fmt.Fprintln(os.Stderr, "debug/gosym cannot read this table: no functions")
		os.Exit(3)
	}
	for _, name := range os.Args[2:] {
		if fn := table.LookupFunc(name); fn != nil {
			fmt.Printf("0x%x %s\n", fn.Entry, name)
		}
	}
}
