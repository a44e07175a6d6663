package vfs_test

import (
	"fmt"
	"log"

	"github.com/durawal/durawal/wal/vfs"
)

// Write a file, sync part of it, lose power: the synced bytes survive, the
// unsynced ones do not (DropAll), or do if the page cache was written back
// in time (KeepAll).
func ExampleMemFS_PowerLoss() {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/data", 0o755); err != nil {
		log.Fatal(err)
	}
	if err := mem.SyncDir("/"); err != nil { // make the new directory durable
		log.Fatal(err)
	}
	f, err := mem.Create("/data/log", vfs.Fdatasync)
	if err != nil {
		log.Fatal(err)
	}
	if err := mem.SyncDir("/data"); err != nil { // make the new name durable
		log.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("synced;"), 0); err != nil {
		log.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		log.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("unsynced"), 7); err != nil {
		log.Fatal(err)
	}

	for _, mode := range []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll()} {
		img := mem.PowerLoss(mode) // mem itself is unchanged
		g, err := img.Open("/data/log")
		if err != nil {
			log.Fatal(err)
		}
		size, err := g.Size()
		if err != nil {
			log.Fatal(err)
		}
		buf := make([]byte, size)
		if _, err := g.ReadAt(buf, 0); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%v: %q\n", mode, buf)
		g.Close()
	}
	// Output:
	// DropAll(): "synced;"
	// KeepAll(): "synced;unsynced"
}
