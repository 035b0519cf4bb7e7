// gonotls: a Go program that does not use crypto/tls; sonde must leave it alone after one look.
package main

import (
	"fmt"
	"time"
)

func main() {
	fmt.Println("ready")
	time.Sleep(500 * time.Millisecond)
}
