// Package host describes the machine a benchmark of the peers module runs
// on: the load average and the filesystem under a directory, which every
// table prints beside its figures.
package host

import (
	"os"
	"strings"
)

// LoadAvg returns the 1, 5 and 15 minute load averages from /proc/loadavg,
// space-separated, or "n/a" where there is none.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}
