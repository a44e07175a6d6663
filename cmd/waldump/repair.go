package main

import (
	"fmt"
	"io"
)

// runRepair is waldump -repair: what wal.Repair would do to dir, or, with
// apply, what it did.
func runRepair(dir string, apply bool, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "waldump: -repair: not built yet")
	return 2
}
