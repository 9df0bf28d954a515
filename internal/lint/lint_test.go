package lint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// _module is the main module's path; its go.mod is two directories up.
	_module = "github.com/appendlog/appendlog"
	// _staticcheck is run with go run at this version: bump it with the Go
	// version in go.mod.
	_staticcheck = "honnef.co/go/tools/cmd/staticcheck@v0.8.2"
	// _requireEnv makes a staticcheck that cannot be fetched a failure.
	_requireEnv = "APPENDLOG_REQUIRE_STATICCHECK"
	// _sysDir is the only directory that may make system calls.
	_sysDir = "internal/sys"
)

// root returns the main module's directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || !bytes.HasPrefix(b, []byte("module "+_module+"\n")) {
		t.Fatalf("%s is not the root of module %s: %v", dir, _module, err)
	}
	return dir
}

// modules returns the directories of the modules the rules cover: the main
// module and peers/, which has its own go.mod.
func modules(t *testing.T) []string {
	r := root(t)
	return []string{r, filepath.Join(r, "peers")}
}

// goFile is one parsed source file; path is relative to the main module's
// root, with forward slashes.
type goFile struct {
	path string
	src  []byte
	fset *token.FileSet
	ast  *ast.File
}

// sourceFiles parses every .go file under the main module's root (peers/
// included), skipping testdata, vendor and directories whose names start
// with "." or "_", as the go command does.
func sourceFiles(t *testing.T) []goFile {
	t.Helper()
	r := root(t)
	var files []goFile
	err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != r && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(r, p)
		if err != nil {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parseFile(filepath.ToSlash(rel), src)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found only %d .go files under %s", len(files), r)
	}
	return files
}

func parseFile(path string, src []byte) (goFile, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return goFile{}, err
	}
	return goFile{path: path, src: src, fset: fset, ast: f}, nil
}

func (f goFile) pos(p token.Pos) string {
	return fmt.Sprintf("%s:%d", f.path, f.fset.Position(p).Line)
}

// inSys reports whether f belongs to internal/sys.
func (f goFile) inSys() bool { return strings.HasPrefix(f.path, _sysDir+"/") }

// importName returns the name f refers to the package at path by, and the
// import's position; "" when f does not import it.
func importName(f *ast.File, path string) (string, *ast.ImportSpec) {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name, imp
			}
			return filepath.Base(path), imp
		}
	}
	return "", nil
}

// _syscallConst matches the syscall names other packages may use: errno
// and signal constants, and their types.
var _syscallConst = regexp.MustCompile(`^(E[A-Z0-9]+|SIG[A-Z0-9]+|Errno|Signal)$`)

// checkImports reports imports of golang.org/x/sys and unsafe outside
// internal/sys, and uses of syscall there other than errno and signal
// constants.
func checkImports(f goFile) []string {
	if f.inSys() {
		return nil
	}
	var bad []string
	for _, imp := range f.ast.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		switch {
		case p == "golang.org/x/sys" || strings.HasPrefix(p, "golang.org/x/sys/"):
			bad = append(bad, fmt.Sprintf("%s: imports %s: system calls belong in %s", f.pos(imp.Pos()), p, _sysDir))
		case p == "unsafe":
			bad = append(bad, fmt.Sprintf("%s: imports unsafe: unsafe belongs in %s", f.pos(imp.Pos()), _sysDir))
		}
	}
	name, imp := importName(f.ast, "syscall")
	switch name {
	case "":
		return bad
	case "_", ".":
		return append(bad, fmt.Sprintf("%s: imports syscall as %q: system calls belong in %s", f.pos(imp.Pos()), name, _sysDir))
	}
	ast.Inspect(f.ast, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == name && !_syscallConst.MatchString(sel.Sel.Name) {
			bad = append(bad, fmt.Sprintf("%s: uses syscall.%s: outside %s only syscall's errno and signal constants may be used",
				f.pos(sel.Pos()), sel.Sel.Name, _sysDir))
		}
		return true
	})
	return bad
}

// _rawAtomic matches the sync/atomic functions that typed atomics replace.
var _rawAtomic = regexp.MustCompile(`^(Add|Load|Store|Swap|CompareAndSwap|And|Or)(Int32|Int64|Uint32|Uint64|Uintptr|Pointer)$`)

const _ignoreRawAtomics = "lint:ignore RawAtomics"

// checkAtomics reports calls of sync/atomic's functions, except those with
// a "lint:ignore RawAtomics" comment on their line or the line before.
func checkAtomics(f goFile) []string {
	name, _ := importName(f.ast, "sync/atomic")
	if name == "" || name == "_" {
		return nil
	}
	ignored := map[int]bool{}
	for _, cg := range f.ast.Comments {
		for _, c := range cg.List {
			if strings.Contains(c.Text, _ignoreRawAtomics) {
				l := f.fset.Position(c.Pos()).Line
				ignored[l], ignored[l+1] = true, true
			}
		}
	}
	var bad []string
	ast.Inspect(f.ast, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == name && _rawAtomic.MatchString(sel.Sel.Name) &&
			!ignored[f.fset.Position(sel.Pos()).Line] {
			bad = append(bad, fmt.Sprintf("%s: atomic.%s: use a typed atomic (atomic.Int64, atomic.Uint64, atomic.Pointer[T], ...), or say why not in a %q comment",
				f.pos(sel.Pos()), sel.Sel.Name, _ignoreRawAtomics))
		}
		return true
	})
	return bad
}

// checkFormat reports a file that gofmt would change, at its first changed
// line.
func checkFormat(f goFile) []string {
	out, err := format.Source(f.src)
	if err != nil {
		return []string{fmt.Sprintf("%s: gofmt: %v", f.path, err)}
	}
	if bytes.Equal(out, f.src) {
		return nil
	}
	line := 1
	for i := 0; i < len(out) && i < len(f.src) && out[i] == f.src[i]; i++ {
		if out[i] == '\n' {
			line++
		}
	}
	return []string{fmt.Sprintf("%s:%d: not gofmt-formatted (run gofmt -w %s)", f.path, line, f.path)}
}

func runRule(t *testing.T, check func(goFile) []string) {
	t.Parallel()
	for _, f := range sourceFiles(t) {
		for _, msg := range check(f) {
			t.Error(msg)
		}
	}
}

func TestForbiddenImports(t *testing.T) { runRule(t, checkImports) }

func TestRawAtomics(t *testing.T) { runRule(t, checkAtomics) }

func TestGofmt(t *testing.T) { runRule(t, checkFormat) }

// TestStaticcheck runs staticcheck over every package of both modules.
func TestStaticcheck(t *testing.T) {
	if testing.Short() {
		t.Skip("staticcheck skipped under -short")
	}
	t.Parallel()
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-10*time.Second))
		defer cancel()
	}
	mods := modules(t)
	// Fetch and build it first, so that a go command that cannot reach
	// the module proxy is told apart from findings.
	if out, err := goCmd(ctx, mods[0], "run", _staticcheck, "-version"); err != nil {
		msg := fmt.Sprintf("cannot run %s with go run: %v\n%s", _staticcheck, err, out)
		if os.Getenv(_requireEnv) != "" {
			t.Fatal(msg)
		}
		t.Skipf("%s\n(set %s=1 to make this a failure, as .ci/run does)", msg, _requireEnv)
	}
	for _, dir := range mods {
		out, err := goCmd(ctx, dir, "run", _staticcheck, "./...")
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("staticcheck in %s: %v\n%s", dir, err, out)
		}
		rel, _ := filepath.Rel(mods[0], dir)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if line != "" && !strings.HasPrefix(line, "go: downloading ") && !_exitStatus.MatchString(line) {
				t.Errorf("staticcheck (%s): %s", rel, line)
			}
		}
		if err != nil && !t.Failed() {
			t.Errorf("staticcheck in %s: %v, and no finding printed\n%s", dir, err, out)
		}
	}
}

// _exitStatus matches the line go run adds when the program fails.
var _exitStatus = regexp.MustCompile(`^exit status \d+$`)

// goCmd runs the go command in dir and returns its combined output.
func goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

// TestRulesCatchViolations checks that each rule reports a planted
// violation at its line, and passes the allowed forms.
func TestRulesCatchViolations(t *testing.T) {
	tests := []struct {
		name  string
		path  string
		src   string
		check func(goFile) []string
		want  []string // one finding per entry, as a substring
	}{
		{"x/sys", "wal/x.go", "package wal\n\nimport \"golang.org/x/sys/unix\"\n\nvar _ = unix.Fdatasync\n",
			checkImports, []string{"wal/x.go:3: imports golang.org/x/sys/unix"}},
		{"unsafe", "wal/x_test.go", "package wal\n\nimport (\n\t\"os\"\n\t\"unsafe\"\n)\n",
			checkImports, []string{"wal/x_test.go:5: imports unsafe"}},
		{"syscall call", "writer/x.go", "package writer\n\nimport \"syscall\"\n\nfunc f(fd int) error {\n\tif fd < 0 {\n\t\treturn syscall.EBADF\n\t}\n\treturn syscall.Fsync(fd)\n}\n",
			checkImports, []string{"writer/x.go:9: uses syscall.Fsync"}},
		{"syscall renamed", "writer/x.go", "package writer\n\nimport sc \"syscall\"\n\nvar _ = sc.O_DIRECT\nvar _ = sc.SIGTERM\n",
			checkImports, []string{"writer/x.go:5: uses syscall.O_DIRECT"}},
		{"syscall dot", "writer/x.go", "package writer\n\nimport . \"syscall\"\n\nvar _ = EIO\n",
			checkImports, []string{"writer/x.go:3: imports syscall as \".\""}},
		{"syscall constants", "writer/x_test.go", "package writer\n\nimport \"syscall\"\n\nvar _ = []error{syscall.EIO, syscall.ENOSPC, syscall.Errno(5)}\nvar _ = syscall.SIGTERM\n",
			checkImports, nil},
		{"sys may", "internal/sys/x_linux.go", "package sys\n\nimport (\n\t\"syscall\"\n\t\"unsafe\"\n\n\t\"golang.org/x/sys/unix\"\n)\n\nvar _ = syscall.Syscall\nvar _ = unix.Fdatasync\nvar _ = unsafe.Pointer(nil)\n",
			checkImports, nil},
		{"raw atomics", "engine/x.go", "package engine\n\nimport \"sync/atomic\"\n\nvar n int64\n\nfunc f() int64 {\n\tatomic.AddInt64(&n, 1)\n\treturn atomic.LoadInt64(&n)\n}\n",
			checkAtomics, []string{"engine/x.go:8: atomic.AddInt64", "engine/x.go:9: atomic.LoadInt64"}},
		{"raw atomics renamed", "engine/x.go", "package engine\n\nimport a \"sync/atomic\"\n\nvar p uintptr\n\nvar _ = a.CompareAndSwapUintptr(&p, 0, 1)\n",
			checkAtomics, []string{"engine/x.go:7: atomic.CompareAndSwapUintptr"}},
		{"typed and ignored atomics", "engine/x.go", "package engine\n\nimport \"sync/atomic\"\n\nvar n atomic.Int64\nvar m uint32\n\nfunc f() {\n\tn.Add(1)\n\t// lint:ignore RawAtomics: m lives in shared memory.\n\tatomic.AddUint32(&m, 1)\n\tatomic.StoreUint32(&m, 0) // lint:ignore RawAtomics: as above.\n}\n",
			checkAtomics, nil},
		{"gofmt", "frame/x.go", "package frame\n\nfunc f() int {\n  return 1\n}\n",
			checkFormat, []string{"frame/x.go:4: not gofmt-formatted"}},
		{"gofmt clean", "frame/x.go", "package frame\n\nfunc f() int {\n\treturn 1\n}\n",
			checkFormat, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseFile(tt.path, []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			got := tt.check(f)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d findings, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("finding %q does not contain %q", got[i], w)
				}
			}
		})
	}
}
