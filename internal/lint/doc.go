// Package lint holds the repository's code rules as tests, so that a rule
// written only in STYLE.md cannot be broken silently (as pebble's
// internal/lint does). It has no code: run it with go test.
//
// The rules, over every .go file of this module and of peers/, whatever
// its build tags, tests included:
//   - TestForbiddenImports: golang.org/x/sys and unsafe only in
//     internal/sys; syscall elsewhere only for its errno and signal
//     constants (syscall.EIO, syscall.SIGTERM), which name no system call.
//   - TestRawAtomics: typed atomics (atomic.Uint64), not the sync/atomic
//     functions (atomic.AddUint64), unless a "lint:ignore RawAtomics"
//     comment on the line or the line before says why.
//   - TestGofmt: every file is as gofmt prints it.
//   - TestStaticcheck: staticcheck at a pinned version, run with go run so
//     it adds nothing to go.mod. It needs the module proxy (or a module
//     cache holding it): under -short, or when the go command cannot fetch
//     it, the test is skipped, unless APPENDLOG_REQUIRE_STATICCHECK is set
//     (.ci/run sets it), which makes that a failure.
//
// Each finding is reported as path:line: what is wrong.
package lint
