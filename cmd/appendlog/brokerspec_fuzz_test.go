package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzBrokerSpec decodes its input as the broker.json of a run to resume
// (readSpec, what `appendlog broker --resume` reads) and checks that it
// never panics, that a refusal names the file, and that a spec it accepts
// is one a command line could have asked for: it passes the flags' own
// checks, its topology can be laid out, and it reads back the same after
// writeSpec.
func FuzzBrokerSpec(f *testing.F) {
	for _, s := range []string{
		`{"format":"appendlog-broker","mode":"streams","streams":20,"publishers":20,"consumers":20,"size":128,"sync":"batch","created":true}`,
		`{"format":"appendlog-broker","mode":"queue","streams":1,"publishers":3,"consumers":7,"size":64,"sync":"always","segment_size":65536,"max_bytes":1048576}`,
		`{"format":"appendlog-broker","mode":"queue","streams":9,"publishers":1,"consumers":1,"size":64,"sync":"never"}`,
		`{"format":"appendlog-broker","mode":"streams","streams":3,"publishers":1,"consumers":1,"size":64,"sync":"batch","segment_size":5}`,
		`{"format":"appendlog-broker","mode":"streams","streams":0,"publishers":1,"consumers":1,"size":64,"sync":"batch"}`,
		`{"format":"appendlog-broker","mode":"streams","streams":1,"publishers":1,"consumers":1,"size":64,"sync":"batch","segment_size":-1}`,
		`{"format":"appendlog-broker","mode":"streams","streams":99999999999999999999}`,
		`{"format":"other"}`, `{"format":"appendlog-broker","mode":"fast"}`, `null`, `[]`, `{`, "", "\x00\xff",
		`{"format":"appendlog-broker","mode":"streams","streams":2,"publishers":2,"consumers":2,"size":64,"sync":"batch"} trailing`,
		`{"format":"appendlog-broker","mode":"streams","streams":2,"publishers":2,"consumers":2,"size":64,"sync":"batch","extra":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, _brokerSpec)
		if err := os.WriteFile(path, in, 0o644); err != nil {
			t.Fatal(err)
		}
		sp, err := readSpec(dir)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("the refusal of %q does not name the file: %v", in, err)
			}
			return
		}
		if err := sp.check(); err != nil {
			t.Fatalf("readSpec accepted %+v, which the flags refuse: %v", sp, err)
		}
		if err := sp.checkSegmentSize(); err != nil {
			t.Fatalf("readSpec accepted %+v, whose segment size the flags refuse: %v", sp, err)
		}
		if sp.Mode == "queue" && sp.Streams != 1 {
			t.Fatalf("readSpec accepted a queue run of %d streams", sp.Streams)
		}
		topo := sp.topology()
		if len(topo.streams) == 0 || len(topo.groups) == 0 || len(topo.pubLanes) != sp.Publishers {
			t.Fatalf("topology of %+v: %d streams, %d groups, %d publishers", sp, len(topo.streams), len(topo.groups), len(topo.pubLanes))
		}
		if err := writeSpec(dir, sp); err != nil {
			t.Fatal(err)
		}
		again, err := readSpec(dir)
		if err != nil || again != sp {
			t.Fatalf("written and read again: %+v, %v; want %+v", again, err, sp)
		}
	})
}
