package nodeprobe

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/results"
)

const (
	uid  = "3f1c2a8e-5b7d-4e21-9a0c-0d4b6e8f1a27"
	uidU = "3f1c2a8e_5b7d_4e21_9a0c_0d4b6e8f1a27"
	cid  = "9f3e0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7"
)

// /proc/PID/cgroup as each kubelet cgroup driver, cgroup version and QoS
// class lays it out.
func TestParseCgroup(t *testing.T) {
	for _, c := range []struct {
		name, file string
		want       PodCgroup
		ok         bool
	}{
		{"v1 cgroupfs besteffort, kubelet cgroup root (this machine's clusters)",
			"12:pids:/spkube1/kubepods/besteffort/pod" + uid + "/" + cid + "\n4:memory:/spkube1/kubepods/besteffort/pod" + uid + "/" + cid + "\n1:cpu:/spkube1/kubepods/besteffort/pod" + uid + "/" + cid + "\n0::/\n",
			PodCgroup{uid, cid}, true},
		{"v1 cgroupfs guaranteed (no QoS level)",
			"3:cpu,cpuacct:/kubepods/pod" + uid + "/" + cid + "\n",
			PodCgroup{uid, cid}, true},
		{"v1 systemd burstable, containerd",
			"9:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + cid + ".scope\n",
			PodCgroup{uid, cid}, true},
		{"v2 systemd guaranteed, cri-o",
			"0::/kubepods.slice/kubepods-pod" + uidU + ".slice/crio-" + cid + ".scope\n",
			PodCgroup{uid, cid}, true},
		{"v2 systemd besteffort, docker, under kind's kubelet.slice",
			"0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + uidU + ".slice/docker-" + cid + ".scope\n",
			PodCgroup{uid, cid}, true},
		{"v2 cgroupfs",
			"0::/kubepods/burstable/pod" + uid + "/" + cid + "\n",
			PodCgroup{uid, cid}, true},
		{"pod's own cgroup, no container",
			"0::/kubepods/burstable/pod" + uid + "\n",
			PodCgroup{uid, ""}, true},
		{"v1: the container on a later line than a pod-level one",
			"2:cpu:/kubepods/pod" + uid + "\n1:memory:/kubepods/pod" + uid + "/" + cid + "\n",
			PodCgroup{uid, cid}, true},
		{"static pod (32 hex digits)",
			"0::/kubepods/burstable/pod0123456789abcdef0123456789abcdef/" + cid + "\n",
			PodCgroup{"0123456789abcdef0123456789abcdef", cid}, true},
		{"not in a pod", "1:cpu:/system.slice/containerd.service\n0::/user.slice\n", PodCgroup{}, false},
		{"a name that only starts like a pod", "0::/podman/pods/podcast\n", PodCgroup{}, false},
		{"empty", "", PodCgroup{}, false},
	} {
		got, ok := ParseCgroup([]byte(c.file))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: got %+v %v, want %+v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestContainerID(t *testing.T) {
	for in, want := range map[string]string{"containerd://" + cid: cid, "cri-o://abc": "abc", cid: cid, "": ""} {
		if got := ContainerID(in); got != want {
			t.Errorf("ContainerID(%q) = %q, want %q", in, got, want)
		}
	}
}

// writeProc makes a fake /proc with the given cgroup files.
func writeProc(t *testing.T, dir string, procs map[int]string) {
	t.Helper()
	for pid, cg := range procs {
		d := filepath.Join(dir, strconv.Itoa(pid))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup"), []byte(cg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The finder indexes processes by pod and container, calls the run's
// pods' processes its own, and asks again about a young process outside
// pods (a container's first process before it joins its cgroup), but not
// about an old one.
func TestCgroupFinder(t *testing.T) {
	dir := t.TempDir()
	const other = "11111111-2222-3333-4444-555555555555"
	in := func(u, c string) string { return "0::/kubepods/besteffort/pod" + u + "/" + c + "\n" }
	writeProc(t, dir, map[int]string{
		10: in(uid, "pause0"), 11: in(uid, cid), 12: in(uid, cid),
		20: in(other, "x"),
		30: "0::/system.slice/containerd.service\n",
		31: "0::/system.slice/containerd.service\n",
	})
	now := time.Unix(1000, 0)
	f := newCgroupFinder(dir, Spec{
		Components: []Component{{Name: "ctr", PodUID: uid, Container: "app", ContainerID: "containerd://" + cid}, {Name: "pod", PodUID: uid}},
	})
	f.now = func() time.Time { return now }
	if err := f.Refresh(); err != nil {
		t.Fatal(err)
	}
	sorted := func(p []int, err error) []int {
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(p)
		return p
	}
	if got := sorted(f.Processes(results.Component{Name: "ctr", PodUID: uid, Container: "app"})); !slices.Equal(got, []int{11, 12}) {
		t.Errorf("container: %v, want [11 12]", got)
	}
	if got := sorted(f.Processes(results.Component{Name: "pod", PodUID: uid})); !slices.Equal(got, []int{10, 11, 12}) {
		t.Errorf("pod: %v, want [10 11 12]", got)
	}
	if _, err := f.Processes(results.Component{Name: "x", PodUID: "00000000-0000-0000-0000-000000000000"}); err == nil {
		t.Error("a pod with no process: no error")
	}
	for pid, want := range map[int]bool{10: true, 11: true, 20: false, 30: false, 99: false} {
		if f.Own(pid) != want {
			t.Errorf("Own(%d) = %v, want %v", pid, !want, want)
		}
	}
	// 30 joins the run's pod half a second after it was first seen: asked
	// again. 31 was still outside when seen a second and a half after, and
	// joins later: that answer was kept.
	now = now.Add(500 * time.Millisecond)
	writeProc(t, dir, map[int]string{30: in(uid, cid)})
	if err := f.Refresh(); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if err := f.Refresh(); err != nil {
		t.Fatal(err)
	}
	writeProc(t, dir, map[int]string{31: in(uid, cid)})
	now = now.Add(200 * time.Millisecond)
	if err := f.Refresh(); err != nil {
		t.Fatal(err)
	}
	if !f.Own(30) || f.Own(31) {
		t.Errorf("Own(30) = %v (joined young: want true), Own(31) = %v (joined old: want false)", f.Own(30), f.Own(31))
	}
	// A process that is gone is forgotten.
	os.RemoveAll(filepath.Join(dir, "12"))
	if err := f.Refresh(); err != nil {
		t.Fatal(err)
	}
	if got := sorted(f.Processes(results.Component{Name: "ctr", PodUID: uid, Container: "app"})); !slices.Equal(got, []int{11, 30}) {
		t.Errorf("container after 12 exited: %v, want [11 30]", got)
	}
}
