// CPU profile test workload: one hot function. Prints "ready" once running.
package main

import "fmt"

var sink uint64

//go:noinline
func hotGoFunction() {
	for i := uint64(0); i < 100000000; i++ {
		sink += i * i
	}
}

func main() {
	fmt.Println("ready")
	for {
		hotGoFunction()
	}
}
