package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParamsKeyStableAcrossJSON(t *testing.T) {
	a := Params{"message_size": int64(1000000), "streams": int64(1), "mode": "x", "on": true}
	b := Params{"message_size": float64(1000000), "streams": float64(1), "mode": "x", "on": true}
	if a.Key() != b.Key() {
		t.Errorf("%q != %q", a.Key(), b.Key())
	}
	if want := "message_size=1000000 mode=x on=true streams=1"; a.Key() != want {
		t.Errorf("key %q, want %q", a.Key(), want)
	}
}

func TestRunDirAppendReopenAndTornLine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	d, err := Create(dir, Manifest{Run: "abc123", Start: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := d.Append(Record{Run: "abc123", Trial: i, Datapath: "native", Workload: "rr", Params: Params{"concurrency": int64(1)}, Rep: i, Metrics: map[string]float64{TransactionsPerS: float64(1000 + i)}}); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	if _, err := Create(dir, Manifest{Run: "other"}); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Errorf("creating over a run: %v, want a hint to --resume", err)
	}
	// A crash mid-write leaves a torn line: reading drops it, reopening cuts it.
	f, _ := os.OpenFile(filepath.Join(dir, RecordsFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"run":"abc123","trial":3,"datap`)
	f.Close()
	recs, err := Load(dir)
	if err != nil || len(recs) != 3 {
		t.Fatalf("load with torn line: %d records, %v", len(recs), err)
	}
	d, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d.Manifest.Run != "abc123" {
		t.Errorf("manifest run %q", d.Manifest.Run)
	}
	if err := d.Append(Record{Run: "abc123", Trial: 3, Datapath: "vxlan", Workload: "rr", Rep: 0}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	recs, err = Load(filepath.Join(dir, RecordsFile))
	if err != nil || len(recs) != 4 || recs[3].Datapath != "vxlan" {
		t.Fatalf("after reopen: %d records, %v", len(recs), err)
	}
	if recs[1].TrialKey() == recs[2].TrialKey() || recs[0].GroupKey() != recs[1].GroupKey() {
		t.Errorf("keys: %q %q %q", recs[0].TrialKey(), recs[1].TrialKey(), recs[2].TrialKey())
	}
}

func TestDecodeNamesBadLine(t *testing.T) {
	_, err := Decode(strings.NewReader("{\"run\":\"a\"}\nnot json\n{\"run\":\"b\"}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err %v, want one naming line 2", err)
	}
}
