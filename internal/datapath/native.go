package datapath

import (
	"context"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
)

// Native routes between sites over the underlay with no overlay: the baseline.
type Native struct{}

var _ Datapath = Native{}

// NativeInfo registers Native.
func NativeInfo() Info {
	return Info{
		Name:    "native",
		Summary: "sites route to each other over the underlay, no overlay (the baseline)",
		New:     func(map[string]any) (Datapath, error) { return Native{}, nil },
	}
}

// Setup builds nothing: the testbed already routes between sites.
func (Native) Setup(context.Context, testbed.Testbed) (*Link, error) {
	return &Link{
		Target:     UnderlayTarget,
		Components: []results.Component{KernelComponent()},
		Close:      func(context.Context) error { return nil },
	}, nil
}
