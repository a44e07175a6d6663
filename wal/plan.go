package wal

import (
	"errors"
	"fmt"
	"strings"
)

// recoveryPlan is recovery's verdict on a log directory: the log it holds
// (RecoveryInfo: where it starts and ends, what is torn, which segment a
// crash cut short) and the steps that make the directory hold exactly that
// log: temporary files to remove, a cut or a removal to finish, a header,
// link or unvouched frames to write again, a torn tail to quarantine and
// zero, the new epoch to record. Recovery builds it by reading only; Open
// then applies it in order, and OpenReadOnly stops before, so the two reach
// the same verdict by construction. Not safe for concurrent use.
type recoveryPlan struct {
	steps []recoveryStep
}

// recoveryStep is one write of a recoveryPlan: what it does, in words, and
// the function that does it.
type recoveryStep struct {
	what string
	do   func() error
}

// add appends a step described by the format and args.
func (p *recoveryPlan) add(do func() error, format string, args ...any) {
	p.steps = append(p.steps, recoveryStep{what: fmt.Sprintf(format, args...), do: do})
}

// describe returns the steps' descriptions, one per step.
func (p *recoveryPlan) describe() []string {
	out := make([]string, len(p.steps))
	for i, s := range p.steps {
		out[i] = s.what
	}
	return out
}

// String lists the steps, one per line.
func (p *recoveryPlan) String() string { return strings.Join(p.describe(), "\n") }

// apply carries out the steps in order, stopping at the first that fails:
// each leaves the directory in a state a later Open recovers (the plan is
// built again from what is then there).
func (p *recoveryPlan) apply() error {
	for _, s := range p.steps {
		if err := s.do(); err != nil {
			if strings.HasPrefix(err.Error(), "wal: ") { // says what failed already
				return err
			}
			return fmt.Errorf("wal: open: %s: %w", s.what, err)
		}
	}
	return nil
}

// sameVerdict reports whether two recovery errors say the same thing: the
// same damage at the same place (a *CorruptionError naming the same segment
// and offset, for the same reason), or errors of the same kind otherwise.
// OpenReadOnly scans a directory a writer may change under it, and lets a
// verdict stand only when a second scan reaches it too.
func sameVerdict(a, b error) bool {
	var ca, cb *CorruptionError
	if errors.As(a, &ca) && errors.As(b, &cb) {
		return ca.Segment == cb.Segment && ca.Offset == cb.Offset && ca.Reason == cb.Reason
	}
	for _, kind := range []error{ErrCorrupt, ErrUnsupportedVersion, ErrForeignFile} {
		if errors.Is(a, kind) != errors.Is(b, kind) {
			return false
		}
	}
	return (a == nil) == (b == nil)
}
