package testbed

import (
	"bytes"
	"strings"
	"sync"
)

// TailBuffer keeps the last lines written to it (a process's stderr,
// for errors). It is safe for concurrent use.
type TailBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
}

// NewTail keeps about the last limit bytes, cut at a line.
func NewTail(limit int) *TailBuffer { return &TailBuffer{limit: limit} }

// Write implements io.Writer.
func (t *TailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(b)
	if t.buf.Len() > 2*t.limit {
		keep := t.buf.Bytes()[t.buf.Len()-t.limit:]
		if i := bytes.IndexByte(keep, '\n'); i >= 0 && i < len(keep)-1 {
			keep = keep[i+1:]
		}
		nb := append([]byte(nil), keep...)
		t.buf.Reset()
		t.buf.Write(nb)
	}
	return len(b), nil
}

// Len is the number of bytes kept.
func (t *TailBuffer) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.Len()
}

// String returns the last few (at most 8) lines.
func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimRight(t.buf.String(), "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, "\n")
}
