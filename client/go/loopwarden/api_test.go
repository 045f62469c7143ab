package loopwarden_test

// The shape of the package rather than its behaviour: its exported API speaks only its own types
// (never the generated loopwardenv1 ones), every exported identifier has a Go doc comment, and
// go.mod is tidy. None of these needs a daemon.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const generatedPackage = "github.com/loopwarden/loopwarden/client/go/loopwardenv1"

// sourceFile is one parsed file of a package.
type sourceFile struct {
	name string
	file *ast.File
}

// parsePackage parses the non-test Go files of the package in dir.
func parsePackage(t *testing.T, dir string) (*token.FileSet, []sourceFile) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []sourceFile
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, sourceFile{filepath.Base(path), file})
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return fset, files
}

// apiLeaks names every exported part of the package's API whose type mentions importPath:
// exported functions, methods of exported types, exported variables and constants, the exported
// fields and methods of every package type the API reaches (an unexported type returned by an
// exported function counts), and type aliases.
func apiLeaks(files []sourceFile, importPath string) []string {
	type typeDecl struct {
		spec *ast.TypeSpec
		file *ast.File
	}
	types := map[string]typeDecl{}
	methods := map[string][]*ast.FuncDecl{}
	methodFile := map[*ast.FuncDecl]*ast.File{}
	for _, f := range files {
		for _, decl := range f.file.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						types[ts.Name.Name] = typeDecl{ts, f.file}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil {
					methods[receiverType(d)] = append(methods[receiverType(d)], d)
					methodFile[d] = f.file
				}
			}
		}
	}

	var leaks []string
	reached := map[string]bool{}
	var reach func(name string)
	// check reports expr (part of the API named where) when it selects from the generated
	// package, and follows the package's own type names it mentions.
	check := func(where string, file *ast.File, expr ast.Node) {
		if expr == nil || reflect.ValueOf(expr).IsNil() {
			return
		}
		local := importNames(file, importPath)
		ast.Inspect(expr, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Field: // a parameter's or result's name is not a type
				ast.Inspect(n.Type, func(m ast.Node) bool { return inspectType(m, local, where, &leaks, reach) })
				return false
			}
			return inspectType(n, local, where, &leaks, reach)
		})
	}
	checkSignature := func(where string, file *ast.File, fn *ast.FuncDecl) {
		check(where, file, fn.Type.TypeParams)
		check(where, file, fn.Type.Params)
		check(where, file, fn.Type.Results)
	}
	reach = func(name string) {
		decl, ok := types[name]
		if !ok || reached[name] {
			return
		}
		reached[name] = true
		check(name, decl.file, decl.spec.TypeParams)
		switch typ := decl.spec.Type.(type) {
		case *ast.StructType:
			for _, field := range typ.Fields.List {
				if len(field.Names) == 0 || anyExported(field.Names) { // embedded fields promote their API
					check(name+"."+fieldName(field), decl.file, field.Type)
				}
			}
		case *ast.InterfaceType:
			for _, method := range typ.Methods.List {
				if len(method.Names) == 0 || anyExported(method.Names) {
					check(name+"."+fieldName(method), decl.file, method.Type)
				}
			}
		default:
			check(name, decl.file, decl.spec.Type)
		}
		for _, method := range methods[name] {
			if method.Name.IsExported() {
				checkSignature(name+"."+method.Name.Name, methodFile[method], method)
			}
		}
	}

	for _, f := range files {
		if names := importNames(f.file, importPath); names["."] {
			leaks = append(leaks, f.name+": dot-imports "+importPath)
		}
		for _, decl := range f.file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					checkSignature(d.Name.Name, f.file, d)
				} else if d.Recv != nil && ast.IsExported(receiverType(d)) {
					reach(receiverType(d)) // its exported methods are checked there
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							reach(s.Name.Name)
						}
					case *ast.ValueSpec:
						if anyExported(s.Names) {
							check(s.Names[0].Name, f.file, s.Type)
							for _, value := range s.Values {
								check(s.Names[0].Name, f.file, value)
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(leaks)
	return leaks
}

// inspectType is the ast.Inspect step of apiLeaks' check.
func inspectType(n ast.Node, generated map[string]bool, where string, leaks *[]string, reach func(string)) bool {
	switch n := n.(type) {
	case *ast.SelectorExpr:
		if pkg, ok := n.X.(*ast.Ident); ok {
			if generated[pkg.Name] {
				*leaks = append(*leaks, where+" mentions "+pkg.Name+"."+n.Sel.Name)
			}
			return false // another package's name is not one of ours
		}
	case *ast.Ident:
		reach(n.Name)
	}
	return true
}

// importNames is the set of names under which file imports importPath ("." for a dot import).
func importNames(file *ast.File, importPath string) map[string]bool {
	names := map[string]bool{}
	for _, spec := range file.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil || path != importPath {
			continue
		}
		if spec.Name != nil {
			names[spec.Name.Name] = true
		} else {
			names[filepath.Base(path)] = true
		}
	}
	return names
}

func receiverType(fn *ast.FuncDecl) string {
	expr := fn.Recv.List[0].Type
	for {
		switch e := expr.(type) {
		case *ast.StarExpr:
			expr = e.X
		case *ast.IndexExpr: // a generic receiver: T[P]
			expr = e.X
		case *ast.IndexListExpr:
			expr = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}

func anyExported(names []*ast.Ident) bool {
	for _, name := range names {
		if name.IsExported() {
			return true
		}
	}
	return false
}

func fieldName(field *ast.Field) string {
	if len(field.Names) > 0 {
		return field.Names[0].Name
	}
	return "(embedded)"
}

func TestExportedAPIDoesNotMentionTheGeneratedPackage(t *testing.T) {
	_, files := parsePackage(t, ".")
	if leaks := apiLeaks(files, generatedPackage); len(leaks) > 0 {
		t.Fatalf("the exported API of package loopwarden uses loopwardenv1 types; convert at the edge:\n%s",
			strings.Join(leaks, "\n"))
	}
}

func TestTheAPICheckFindsEveryKindOfLeak(t *testing.T) {
	source := `package leaky

import wire "` + generatedPackage + `"

type Event struct {
	Message *wire.Event
	hidden  *wire.Event
}

type options struct{ Config *wire.EffectiveConfig }

type Alias = wire.Verdict

type Client struct{}

func (c *Client) Send(events ...*wire.Event) error { return nil }
func (c *Client) internal(*wire.Event)              {}
func (Event) Wire() wire.Event                      { return wire.Event{} }
func New() (*options, error)                        { return nil, nil }
func Convert[T any](m map[string]wire.Action) T     { var t T; return t }
func private(*wire.Event)                           {}

var Default = wire.Action_ACTION_ALLOW
`
	file, err := parser.ParseFile(token.NewFileSet(), "leaky.go", source, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Alias mentions wire.Verdict",
		"Client.Send mentions wire.Event",
		"Convert mentions wire.Action",
		"Default mentions wire.Action_ACTION_ALLOW",
		"Event.Message mentions wire.Event",
		"Event.Wire mentions wire.Event",
		"options.Config mentions wire.EffectiveConfig",
	}
	if got := apiLeaks([]sourceFile{{"leaky.go", file}}, generatedPackage); !reflect.DeepEqual(want, got) {
		t.Fatalf("leaks found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// docStartsWith reports whether a doc comment's text begins with name (after an optional article),
// the convention go doc and linters expect.
func docStartsWith(doc *ast.CommentGroup, name string) bool {
	if doc == nil {
		return false
	}
	text := doc.Text()
	for _, article := range []string{"A ", "An ", "The "} {
		text = strings.TrimPrefix(text, article)
	}
	return strings.HasPrefix(text, name+" ")
}

func TestEveryExportedIdentifierHasADocComment(t *testing.T) {
	fset, files := parsePackage(t, ".")
	var missing []string
	report := func(pos token.Pos, what string) {
		missing = append(missing, fset.Position(pos).String()+": "+what)
	}
	packageDocs := 0
	for _, f := range files {
		if f.file.Doc != nil {
			packageDocs++
			if f.name != "doc.go" || !strings.HasPrefix(f.file.Doc.Text(), "Package loopwarden ") {
				report(f.file.Package, "the package comment belongs in doc.go and starts with \"Package loopwarden \"")
			}
		}
		for _, decl := range f.file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				exported := d.Name.IsExported() && (d.Recv == nil || ast.IsExported(receiverType(d)))
				if exported && !docStartsWith(d.Doc, d.Name.Name) {
					report(d.Pos(), d.Name.Name+": doc comment missing or not starting with its name")
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						doc := s.Doc
						if doc == nil && len(d.Specs) == 1 {
							doc = d.Doc
						}
						if !docStartsWith(doc, s.Name.Name) {
							report(s.Pos(), s.Name.Name+": doc comment missing or not starting with its name")
						}
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, field := range st.Fields.List {
								if anyExported(field.Names) && field.Doc == nil && field.Comment == nil {
									report(field.Pos(), s.Name.Name+"."+field.Names[0].Name+": field without a comment")
								}
							}
						}
					case *ast.ValueSpec:
						doc := s.Doc
						if doc == nil && len(d.Specs) == 1 {
							doc = d.Doc
						}
						for _, name := range s.Names {
							if name.IsExported() && !docStartsWith(doc, name.Name) {
								report(name.Pos(), name.Name+": doc comment missing or not starting with its name")
							}
						}
					}
				}
			}
		}
	}
	if packageDocs != 1 {
		missing = append(missing, "want exactly one package comment (doc.go), found "+strconv.Itoa(packageDocs))
	}
	if len(missing) > 0 {
		t.Fatalf("undocumented exported API:\n%s", strings.Join(missing, "\n"))
	}
}

// NOTE: `go mod tidy -diff` (Go 1.23+) must see every module of the build list, test dependencies
// of dependencies included; go test itself downloads only what it compiles. So an offline machine
// with a cold module cache cannot run the check at all: that skips, anything else fails.
func TestGoModIsTidy(t *testing.T) {
	cmd := exec.Command("go", "mod", "tidy", "-diff")
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local") // never fetch a toolchain to answer
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	for _, offline := range []string{"GOPROXY=off", "dial tcp", "no such host", "proxyconnect", "i/o timeout"} {
		if strings.Contains(string(out), offline) {
			t.Skipf("go mod tidy -diff needs modules this machine cannot download:\n%s", out)
		}
	}
	t.Fatalf("go.mod or go.sum is not tidy; run `go mod tidy` in client/go (%v):\n%s", err, out)
}
