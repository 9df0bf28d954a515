package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/appendlog/appendlog/writer"
)

// flushWriter is what every writer in package writer provides: the
// writer.Writer interface plus Flush. A new writer type plugs into the
// benchmark with an open function that returns one.
type flushWriter interface {
	writer.Writer
	Flush(ctx context.Context) error
}

// Every writer the benchmark runs is a flushWriter.
var (
	_ flushWriter = (*writer.Ring)(nil)
	_ flushWriter = (*writer.Buffered)(nil)
	_ flushWriter = (*writer.Slab)(nil)
	_ flushWriter = (*writer.Mmap)(nil)
	_ flushWriter = (*writer.Direct)(nil)
)

// writerSink runs any flushWriter: Write per record, Flush to stop the
// clock, Close (which syncs) after it.
type writerSink struct {
	nopDone
	w    flushWriter
	file *os.File // closed after w when the sink owns the file, else nil
	path string
}

func (s *writerSink) producer(int) (producer, error) { return s, nil }

func (s *writerSink) write(rec []byte) error {
	_, err := s.w.Write(rec)
	return err
}

func (s *writerSink) finish(ctx context.Context) error { return s.w.Flush(ctx) }

func (s *writerSink) close() error {
	err := s.w.Close()
	if s.file != nil {
		err = errors.Join(err, s.file.Close())
	}
	return err
}

func (s *writerSink) output() output  { return output{path: s.path} }
func (s *writerSink) dropped() uint64 { return s.w.Stats().DroppedRecords }

// onFile opens a new file in dir and wraps it in the writer wrap returns;
// the sink closes the file after the writer.
func onFile(dir string, wrap func(f *os.File) (flushWriter, error)) (sink, error) {
	f, err := createFile(dir, 0)
	if err != nil {
		return nil, err
	}
	w, err := wrap(f)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return &writerSink{w: w, file: f, path: f.Name()}, nil
}

func openBuffered(_ context.Context, dir string, _ runCase) (sink, error) {
	return onFile(dir, func(f *os.File) (flushWriter, error) {
		return writer.NewBuffered(f, 64<<10), nil
	})
}

func openSlab(_ context.Context, dir string, _ runCase) (sink, error) {
	return onFile(dir, func(f *os.File) (flushWriter, error) {
		return writer.NewSlab(f, nil)
	})
}

func openMmap(_ context.Context, dir string, _ runCase) (sink, error) {
	path := filepath.Join(dir, _fileName)
	m, err := writer.OpenMmap(path, nil)
	if err != nil {
		return nil, err
	}
	return &writerSink{w: m, path: path}, nil
}

func openRing(direct bool) func(context.Context, string, runCase) (sink, error) {
	return func(_ context.Context, dir string, _ runCase) (sink, error) {
		path := filepath.Join(dir, _fileName)
		r, err := writer.OpenFile(path, &writer.RingOptions{Direct: direct})
		if err != nil {
			return nil, err
		}
		return &writerSink{w: r, path: path}, nil
	}
}
