package wal

import "strconv"

// LSN is a log sequence number: the byte position of a frame in the logical
// log, monotonic across segments (as in InnoDB). Positions count frame bytes
// only: segment headers and the unused tail of a rolled segment take no LSNs.
// A record is identified by the LSN of its frame; "durable up to x" means
// every frame that ends at or before x is durable.
type LSN uint64

// String returns the LSN in decimal.
func (l LSN) String() string { return strconv.FormatUint(uint64(l), 10) }
