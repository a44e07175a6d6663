package faultfs

import (
	"sync"
	"sync/atomic"
	"syscall"
)

// OnIndex fails the operation whose [Op.Index] is n (1-based, across all
// kinds) with err.
func OnIndex(n int64, err error) Injector {
	return InjectorFunc(func(op Op) error {
		if op.Index == n {
			return err
		}
		return nil
	})
}

// OnKind fails every operation of kind k with err.
func OnKind(k OpKind, err error) Injector {
	return InjectorFunc(func(op Op) error {
		if op.Kind == k {
			return err
		}
		return nil
	})
}

// RefuseDirectIO fails every OpCreate and OpOpenReadWrite that asks for
// O_DIRECT ([SyncMethod.Direct]) with EINVAL, as open(2) does on a
// filesystem without direct I/O (older tmpfs, some overlay and FUSE mounts,
// ext4 with data=journal). Nothing is opened or created.
func RefuseDirectIO() Injector {
	return InjectorFunc(func(op Op) error {
		if (op.Kind == OpCreate || op.Kind == OpOpenReadWrite) && op.Method.Direct() {
			return syscall.EINVAL
		}
		return nil
	})
}

// Nth fails only the n-th (1-based) operation of kind k with err. The
// returned Injector counts the operations it is asked about, so use a new
// one per injected FS. Safe for concurrent use.
func Nth(k OpKind, n int, err error) Injector {
	var seen atomic.Int64
	return InjectorFunc(func(op Op) error {
		if op.Kind == k && seen.Add(1) == int64(n) {
			return err
		}
		return nil
	})
}

// Any asks every injector about every operation, in order, and returns the
// first non-nil answer. Asking all of them keeps counting injectors (Nth,
// [Counter], [NoSpaceAfter]) accurate even when an earlier one fires. The
// returned Injector is a [Tracker]: each [Tracker] among injs that let an
// operation run hears Finished when it has returned, or at once when
// another of injs failed it, so that it never waits for an operation that
// will not run. It tells operations apart by Op.Index: use a new one per
// injected FS.
func Any(injs ...Injector) Injector {
	return &anyInjector{injs: injs, running: map[int64][]Tracker{}}
}

type anyInjector struct {
	injs    []Injector
	mu      sync.Mutex
	running map[int64][]Tracker // by Op.Index: the trackers that let it run
}

func (a *anyInjector) MaybeError(op Op) error {
	var first error
	var let []Tracker
	for _, inj := range a.injs {
		err := inj.MaybeError(op)
		if err != nil && first == nil {
			first = err
		}
		if o, ok := inj.(Tracker); ok && runs(op, err) {
			let = append(let, o)
		}
	}
	if !runs(op, first) {
		for _, o := range let {
			o.Finished(op) // admitted, but another injector failed it
		}
		return first
	}
	if len(let) > 0 {
		a.mu.Lock()
		a.running[op.Index] = let
		a.mu.Unlock()
	}
	return first
}

// Finished passes op on to the trackers that let it run.
func (a *anyInjector) Finished(op Op) {
	a.mu.Lock()
	let := a.running[op.Index]
	delete(a.running, op.Index)
	a.mu.Unlock()
	for _, o := range let {
		o.Finished(op)
	}
}

// runs reports whether Inject runs op when an injector answers err: nil, or
// a *ShortOp on a read or write.
func runs(op Op, err error) bool {
	if err == nil {
		return true
	}
	_, short := err.(*ShortOp)
	return short && (op.Kind == OpRead || op.Kind == OpWrite)
}

// Counter is an [Injector] that fails nothing and counts the operations it
// sees, per kind: faultfs.Inject(vfs.OS(), c) counts real system calls. The zero
// value is ready to use; it is safe for concurrent use. Use it by pointer.
type Counter struct {
	counts [numOpKinds]atomic.Int64
}

// MaybeError counts op and returns nil.
func (c *Counter) MaybeError(op Op) error {
	if op.Kind > 0 && op.Kind < numOpKinds {
		c.counts[op.Kind].Add(1)
	}
	return nil
}

// Count returns how many operations of kind k were seen.
func (c *Counter) Count(k OpKind) int64 {
	if k <= 0 || k >= numOpKinds {
		return 0
	}
	return c.counts[k].Load()
}

// Total returns how many operations of every kind were seen.
func (c *Counter) Total() int64 {
	var t int64
	for i := range c.counts {
		t += c.counts[i].Load()
	}
	return t
}

// CountedInjector wraps an Injector and counts how many errors it returned,
// which shows that an injected fault was really reached. Safe for concurrent
// use if the wrapped Injector is.
type CountedInjector struct {
	inj   Injector
	fired atomic.Int64
}

// Counted returns inj wrapped in a [CountedInjector].
func Counted(inj Injector) *CountedInjector { return &CountedInjector{inj: inj} }

// MaybeError asks the wrapped injector and counts a non-nil answer.
func (c *CountedInjector) MaybeError(op Op) error {
	err := c.inj.MaybeError(op)
	if err != nil {
		c.fired.Add(1)
	}
	return err
}

// Finished passes op on to the wrapped injector if it is a [Tracker].
func (c *CountedInjector) Finished(op Op) {
	if o, ok := c.inj.(Tracker); ok {
		o.Finished(op)
	}
}

// Fired returns how many non-nil errors the wrapped injector returned.
func (c *CountedInjector) Fired() int64 { return c.fired.Load() }

// NoSpaceAfter lets writes through until n bytes in total were written
// through the injected FS. The write that would cross n writes only the bytes
// that fit and returns them with an error matching syscall.ENOSPC (a short
// write); every later non-empty write writes nothing and returns ENOSPC.
// Bytes are counted when the write is let through, whether or not the
// underlying write then succeeds. Safe for concurrent use; use a new one per
// injected FS.
func NoSpaceAfter(n int64) Injector {
	var mu sync.Mutex
	var written int64
	return InjectorFunc(func(op Op) error {
		if op.Kind != OpWrite || op.Len == 0 {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		left := n - written
		if left <= 0 {
			return syscall.ENOSPC
		}
		if int64(op.Len) > left {
			written = n
			return &ShortOp{Keep: int(left), Err: syscall.ENOSPC}
		}
		written += int64(op.Len)
		return nil
	})
}

// ShortWriteOnNth makes the n-th (1-based) write write only its first keep
// bytes and return err (io.ErrShortWrite if err is nil). Other writes run
// normally. Safe for concurrent use; use a new one per injected FS.
func ShortWriteOnNth(n int, keep int, err error) Injector {
	return Nth(OpWrite, n, &ShortOp{Keep: keep, Err: err})
}

// ShortReadOnNth makes the n-th (1-based) read read only its first keep
// bytes and return io.ErrUnexpectedEOF, as io.ReaderAt requires when fewer
// bytes than asked are returned. Other reads run normally. Safe for
// concurrent use; use a new one per injected FS.
func ShortReadOnNth(n int, keep int) Injector {
	return Nth(OpRead, n, &ShortOp{Keep: keep})
}
