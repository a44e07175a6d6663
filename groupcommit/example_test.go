package groupcommit_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/durawal/durawal/groupcommit"
)

func ExampleQueue_Wait() {
	// A fake log: appending reserves bytes; a flush "writes and syncs"
	// everything appended so far and reports how far it got.
	var mu sync.Mutex
	var appended uint64
	appendRecord := func(size uint64) (end uint64) {
		mu.Lock()
		defer mu.Unlock()
		appended += size
		return appended
	}
	flush := func(need groupcommit.Level) (written, synced uint64, err error) {
		mu.Lock()
		defer mu.Unlock()
		return appended, appended, nil // one write + one fdatasync would go here
	}

	q, err := groupcommit.New(flush, groupcommit.Options{})
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			lsn := appendRecord(100)
			// Returns once a finished flush has made the record durable.
			if err := q.Wait(context.Background(), lsn, groupcommit.Synced); err != nil {
				panic(err)
			}
		})
	}
	wg.Wait()
	s := q.Stats()
	// How many groups the four commits took depends on scheduling.
	fmt.Println("commits:", s.Commits, "synced LSN:", s.Synced)
	// Output:
	// commits: 4 synced LSN: 400
}
