package wal_test

import (
	"fmt"
	"io"
	"log"
	"os"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
)

// Open a log, append, close, reopen and replay what it holds.
func Example() {
	dir, err := os.MkdirTemp("", "durawal-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	l, err := wal.Open(dir, wal.Options{SegmentSize: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	for _, rec := range []string{"create table t", "insert 1", "insert 2"} {
		if _, err := l.Append([]byte(rec)); err != nil { // durable on return
			log.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}

	l, err = wal.Open(dir, wal.Options{SegmentSize: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	r, err := l.NewReader(0)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d %s\n", lsn, rec)
	}
	fmt.Println("next LSN", l.AppendedLSN())
	// Output:
	// 0 create table t
	// 40 insert 1
	// 72 insert 2
	// next LSN 104
}

// Append returns the record's LSN once the policy is satisfied: here after
// the write (policy.SyncNever); Sync then makes everything appended durable.
func ExampleLog_Append() {
	dir, err := os.MkdirTemp("", "durawal-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := wal.Open(dir, wal.Options{SegmentSize: 1 << 20, Policy: policy.SyncNever()})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	lsn, err := l.Append([]byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended at", lsn, "written to", l.WrittenLSN(), "synced to", l.SyncedLSN())
	if err := l.Sync(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("synced to", l.SyncedLSN())
	_, err = l.Append(nil)
	fmt.Println(err)
	// Output:
	// appended at 0 written to 32 synced to 0
	// synced to 32
	// wal: empty record
}

// A Reader replays records from any LSN, across segments; here from the
// second record on.
func ExampleReader() {
	dir, err := os.MkdirTemp("", "durawal-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := wal.Open(dir, wal.Options{SegmentSize: 1 << 20, Policy: policy.SyncNever()})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	var second wal.LSN
	for i := range 4 {
		lsn, err := l.Append(fmt.Appendf(nil, "record %d", i))
		if err != nil {
			log.Fatal(err)
		}
		if i == 1 {
			second = lsn
		}
	}

	r, err := l.NewReader(second)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d: %s\n", lsn, rec)
	}
	// Output:
	// 32: record 1
	// 64: record 2
	// 96: record 3
}
