package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// TestNilContext calls every method of Engine that takes a context with a
// nil one (found by reflection, so a new method is covered too) and zero
// values for its other arguments. Each returns an error wrapping
// ErrNilContext, without a panic; the engine does not fail, records no
// flush or sync request, and goes on working.
func TestNilContext(t *testing.T) {
	sink := &memSink{t: t}
	e, err := New(Config{Size: MinSize}, sink)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.Claim(100, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.Put(c, 0, make([]byte, 100))
	e.Commit(c)

	ctxType := reflect.TypeFor[context.Context]()
	errType := reflect.TypeFor[error]()
	v := reflect.ValueOf(e)
	calls := 0
	for i := range v.NumMethod() {
		m := v.Type().Method(i)
		takesCtx := false
		for j := 1; j < m.Type.NumIn(); j++ {
			takesCtx = takesCtx || m.Type.In(j) == ctxType
		}
		if !takesCtx {
			continue
		}
		if m.Type.NumOut() != 1 || m.Type.Out(0) != errType {
			t.Errorf("method %s%s: extend this test to its results", m.Name, m.Type)
			continue
		}
		args := make([]reflect.Value, m.Type.NumIn()-1)
		for j := range args {
			args[j] = reflect.Zero(m.Type.In(j + 1))
		}
		calls++
		if err := callNil(v.Method(i), args); !errors.Is(err, ErrNilContext) {
			t.Errorf("%s(nil, ...) = %v, want an error wrapping ErrNilContext", m.Name, err)
		}
	}
	if calls < 4 {
		t.Fatalf("found %d methods taking a context, want at least Flush, Sync, WaitSynced and AwaitAtLeast", calls)
	}
	if err := e.Err(); err != nil {
		t.Fatalf("the engine failed: %v", err)
	}
	if r := e.flushReq.Load(); r != 0 {
		t.Errorf("a nil-context call raised the flush request to %d", r)
	}
	if r := e.syncReq.Load(); r != 0 {
		t.Errorf("a nil-context call raised the sync request to %d", r)
	}
	if err := e.Sync(context.Background()); err != nil {
		t.Fatalf("Sync after the nil-context calls: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(sink.bytes()); got != 100 {
		t.Fatalf("sink has %d bytes, want 100", got)
	}
}

// callNil calls m with args and returns its error, or the panic as an
// error.
func callNil(m reflect.Value, args []reflect.Value) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	err, _ = m.Call(args)[0].Interface().(error)
	return err
}
