package writer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// TestNilContext calls every method of every writer that takes a context
// (found by reflection, so a new one is covered too) with a nil context.
// Each returns an error wrapping ErrNilContext, without a panic, and the
// writer carries on as if the call had not been made: later records are
// written and Close succeeds.
func TestNilContext(t *testing.T) {
	ctxType := reflect.TypeFor[context.Context]()
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			w, output := tg.open(t)
			if _, err := w.Write([]byte("before\n")); err != nil {
				t.Fatal(err)
			}
			v := reflect.ValueOf(w)
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
				if m.Type.NumIn() != 2 || m.Type.NumOut() != 1 || m.Type.Out(0) != reflect.TypeFor[error]() {
					t.Errorf("%s: method %s%s: extend this test to its signature", tg.name, m.Name, m.Type)
					continue
				}
				calls++
				err := callNil(v.Method(i), ctxType)
				if !errors.Is(err, ErrNilContext) {
					t.Errorf("%s(nil) = %v, want an error wrapping ErrNilContext", m.Name, err)
				}
			}
			if calls == 0 {
				t.Fatalf("%T has no method taking a context", w)
			}
			if r, ok := w.(*Ring); ok && r.Err() != nil {
				t.Errorf("the Ring failed: %v", r.Err())
			}
			if _, err := w.Write([]byte("after\n")); err != nil {
				t.Errorf("Write after the nil-context calls: %v", err)
			}
			if err := w.(flusher).Flush(context.Background()); err != nil {
				t.Errorf("Flush after the nil-context calls: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if got := string(output()); got != "before\nafter\n" {
				t.Errorf("output %q", got)
			}
		})
	}
}

// callNil calls m with a nil context and returns its error, or the panic
// as an error.
func callNil(m reflect.Value, ctxType reflect.Type) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	out := m.Call([]reflect.Value{reflect.Zero(ctxType)})
	err, _ = out[0].Interface().(error)
	return err
}
