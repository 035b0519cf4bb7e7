// A stdlib-only Go program whose .gopclntab the symbolize tests read: several packages and
// files, methods, closures, generics and small functions the compiler inlines.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"sonde.test/goprog/shapes"
)

type result struct {
	Name  string  `json:"name"`
	Area  float64 `json:"area"`
	Sides int     `json:"sides"`
}

func square(x int) int { return x * x }

func sumSquares(xs []int) int {
	total := 0
	for _, x := range xs {
		total += square(x)
	}
	return total
}

func collect[T any](xs []T, keep func(T) bool) []T {
	var out []T
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

func main() {
	all := []shapes.Shape{shapes.NewRect(2, 3), shapes.NewCircle(1.5), shapes.NewRect(4, 4)}
	big := collect(all, func(s shapes.Shape) bool { return s.Area() > 5 })
	sort.Slice(big, func(i, j int) bool { return big[i].Area() < big[j].Area() })
	var results []result
	for _, s := range big {
		results = append(results, result{Name: s.Name(), Area: s.Area(), Sides: s.Sides()})
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(results); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(strings.Repeat("=", sumSquares([]int{1, 2, 3})))
}
