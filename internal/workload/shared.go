package workload

import (
	"errors"
	"io"
	"slices"
	"sync"
)

// Shared holds what the trials of one group (a repetition of a datapath,
// on one testbed) share: a server that takes seconds to start, such as a
// broker, starts with the first trial that asks for it and stops when the
// group ends, as the datapath does. The runner makes one per group and
// closes it before the datapath goes; a nil *Shared (a workload run on
// its own) shares nothing.
type Shared struct {
	mu     sync.Mutex
	items  map[string]io.Closer
	order  []string
	closed bool
}

// NewShared returns an empty Shared.
func NewShared() *Shared { return &Shared{items: map[string]io.Closer{}} }

// Get returns what is kept under key, started by start the first time
// (or again after Drop). A start that fails keeps nothing: the next Get
// tries again. With a nil s, Get calls start and keeps nothing, and
// owned is true: the caller closes what it got.
func (s *Shared) Get(key string, start func() (io.Closer, error)) (v io.Closer, owned bool, err error) {
	if s == nil {
		v, err = start()
		return v, true, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false, errors.New("shared: the group has ended")
	}
	if v, ok := s.items[key]; ok {
		return v, false, nil
	}
	if v, err = start(); err != nil {
		return nil, false, err
	}
	s.items[key] = v
	s.order = append(s.order, key)
	return v, false, nil
}

// Drop closes what is kept under key (a server found dead, say) and
// forgets it, so that the next Get starts it afresh.
func (s *Shared) Drop(key string) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.items[key]
	if !ok {
		return nil
	}
	delete(s.items, key)
	s.order = slices.DeleteFunc(s.order, func(k string) bool { return k == key })
	return v.Close()
}

// Close closes everything kept, the last started first; later Gets fail.
func (s *Shared) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for _, k := range slices.Backward(s.order) {
		errs = append(errs, s.items[k].Close())
	}
	s.items, s.order = map[string]io.Closer{}, nil
	return errors.Join(errs...)
}
