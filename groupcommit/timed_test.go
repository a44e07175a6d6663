package groupcommit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/durawal/durawal/groupcommit"
)

// TestWaitTimedSharesTheGroupsTime: the leader and the followers one flush
// covers get the same time from WaitTimed, read when the FlushFunc
// returned: after the flush began and before the waits returned. A commit
// covered at the call gets the zero Time, as does one whose wait failed.
func TestWaitTimedSharesTheGroupsTime(t *testing.T) {
	f := &fakeLog{}
	g1, g2 := newGate(1), newGate(2)
	f.hold = func(n int64) error { g1.hold(n); return g2.hold(n) }
	q := newQueue(t, f, groupcommit.Options{DisableAdaptiveWait: true})

	// Flush 1 holds the queue while four followers queue up; flush 2, led
	// by one of them, covers them all.
	first := f.append(10)
	firstDone := make(chan error, 1)
	go func() { _, err := q.WaitTimed(context.Background(), first, groupcommit.Synced); firstDone <- err }()
	<-g1.entered
	const n = 4
	times := make([]time.Time, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		lsn := f.append(10)
		wg.Add(1)
		go func() {
			defer wg.Done()
			times[i], errs[i] = q.WaitTimed(context.Background(), lsn, groupcommit.Synced)
		}()
	}
	for q.Stats().Active < n+1 {
		time.Sleep(time.Millisecond)
	}
	g1.open()
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	<-g2.entered
	began := time.Now() // flush 2 is running: its time comes after this
	g2.open()
	wg.Wait()
	returned := time.Now()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("waiter %d: %v", i, errs[i])
		}
		if !times[i].Equal(times[0]) {
			t.Errorf("waiter %d got %v, waiter 0 %v: one group, one time", i, times[i], times[0])
		}
	}
	if times[0].Before(began) || times[0].After(returned) {
		t.Errorf("group time %v not within the flush: began %v, waits returned %v", times[0], began, returned)
	}

	// Covered at the call: nothing waited for, no time.
	if at, err := q.WaitTimed(context.Background(), first, groupcommit.Synced); err != nil || !at.IsZero() {
		t.Errorf("covered at the call: %v, %v; want the zero Time and nil", at, err)
	}
	// A failed wait: no time.
	f.hold = func(int64) error { return errors.New("disk on fire") }
	if at, err := q.WaitTimed(context.Background(), f.append(10), groupcommit.Synced); err == nil || !at.IsZero() {
		t.Errorf("failed flush: %v, %v; want the zero Time and the error", at, err)
	}
}

// TestWaitTimedAdvance: followers woken by Advance get the time Advance
// covered them at, not an earlier flush's.
func TestWaitTimedAdvance(t *testing.T) {
	f := &fakeLog{}
	g := newGate(1)
	f.hold = g.hold
	q := newQueue(t, f, groupcommit.Options{DisableAdaptiveWait: true})
	leaderDone := make(chan error, 1)
	first := f.append(10)
	go func() { _, err := q.WaitTimed(context.Background(), first, groupcommit.Written); leaderDone <- err }()
	<-g.entered
	lsn := f.append(10)
	got := make(chan time.Time, 1)
	go func() {
		at, err := q.WaitTimed(context.Background(), lsn, groupcommit.Synced)
		if err != nil {
			t.Error(err)
		}
		got <- at
	}()
	for q.Stats().Active < 2 {
		time.Sleep(time.Millisecond)
	}
	before := time.Now()
	q.Advance(lsn, lsn) // a background sync covered it
	at := <-got
	if at.Before(before) || at.After(time.Now()) {
		t.Errorf("time %v not within Advance (called at %v)", at, before)
	}
	g.open()
	if err := <-leaderDone; err != nil {
		t.Fatal(err)
	}
}
