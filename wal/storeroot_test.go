package wal_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/appendlog/appendlog/stream"
	"github.com/appendlog/appendlog/wal"
)

// tree lists every path under root.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// TestStoreRootIsNotALog: the directory of a stream store (whole, open or
// closed, or left by a Create killed before it wrote its STORE file) is
// refused by Open, OpenReader, Verify, Repair and ReadCursors with an
// error naming it, saying it is a stream store and where its streams'
// logs are, and nothing is created in it. The store's LOCK file made it
// look like an empty log: Open wrote a segment beside the store's files.
func TestStoreRootIsNotALog(t *testing.T) {
	check := func(t *testing.T, root string, logs ...string) {
		t.Helper()
		before := tree(t, root)
		var errs []error
		l, err := wal.Open(root, nil)
		if err == nil {
			l.Close()
		}
		errs = append(errs, err)
		r, err := wal.OpenReader(root, 0, nil)
		if err == nil {
			r.Close()
		}
		errs = append(errs, err)
		_, err = wal.Verify(root, nil)
		errs = append(errs, err)
		_, err = wal.Repair(root, false, nil)
		errs = append(errs, err)
		_, err = wal.Repair(root, true, nil)
		errs = append(errs, err)
		_, err = wal.ReadCursors(root, nil)
		errs = append(errs, err)
		for i, err := range errs {
			op := []string{"Open", "OpenReader", "Verify", "Repair", "forced Repair", "ReadCursors"}[i]
			if !errors.Is(err, wal.ErrNotLog) || !strings.Contains(err.Error(), root+" is a stream store") ||
				!strings.Contains(err.Error(), filepath.Join(root, "streams", "NAME", "log")) {
				t.Errorf("%s: %v, want ErrNotLog saying %s is a stream store and where a stream's log is", op, err, root)
				continue
			}
			for _, l := range logs {
				if !strings.Contains(err.Error(), l) {
					t.Errorf("%s: %v does not name the log %s", op, err, l)
				}
			}
		}
		if after := tree(t, root); !slices.Equal(after, before) {
			t.Fatalf("the store directory changed:\nbefore %v\nafter  %v", before, after)
		}
	}
	t.Run("store", func(t *testing.T) {
		root := t.TempDir()
		st, err := stream.Open(root, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := st.Create("orders", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Publish([]byte("one")); err != nil {
			t.Fatal(err)
		}
		log := filepath.Join(root, "streams", "orders", "log")
		t.Run("open", func(t *testing.T) { check(t, root, log) })
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		t.Run("closed", func(t *testing.T) { check(t, root, log) })
		if rep, err := wal.Verify(log, nil); err != nil || rep.Records != 1 {
			t.Fatalf("Verify of the stream's log %s: %+v, %v", log, rep, err)
		}
	})
	t.Run("unfinished", func(t *testing.T) {
		// What a Create killed before it wrote STORE leaves.
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "LOCK"), []byte("pid 1"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(root, "streams"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "STORE.tmp"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		check(t, root)
	})
}
