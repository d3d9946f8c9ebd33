#!/usr/bin/python3
"""function_length.py [ROOT] - every C++ function body is at most 70 lines.

Functions you can hold in mind: TigerStyle's limit of 70 lines a function,
which this repository's guide asks for. A body over it names its file, line
and length, and the exit status is 1. ctest style.function_length runs it on
the tree's C++ folders (the ones style.clang_format checks).

How it finds functions: with preprocessor lines, comments and literals
blanked, it follows the braces; a function body is a `{` opened where only
namespaces and classes enclose it, after a statement with a parameter list
and no `=` before it, up to its `}`. Lambdas and local classes count towards
the function that holds them, as do TEST bodies (clang-tidy's
readability-function-size skips those: they come from a macro). Over the
tree at 3fb2d66 it found the five functions over 70 lines that clang-tidy's
check (LineThreshold 70, 148 files) found two of.

  tests/function_length.py --self-test   checks the checker on made-up files
"""
import os
import re
import sys
import tempfile

LIMIT = 70
FOLDERS = ('fabric', 'systems', 'harness', 'microbench', 'apps', 'cli', 'tests')
SCOPE = re.compile(
    r'^(template\s*<.*>\s*)?(inline\s+)?(namespace|class|struct|union|enum|extern)\b')
RAW_STRING = re.compile(r'R"([^(\s]{0,16})\(')


def code_only(text):
    """`text` with preprocessor lines, comments, string and character literals
    blanked (newlines kept), so that the braces left are the code's."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '#' and text[text.rfind('\n', 0, i) + 1:i].strip() == '':
            end = i  # a preprocessor line, with its continuations
            while True:
                end = text.find('\n', end)
                if end < 0 or text[end - 1] != '\\':
                    break
                end += 1
            end = n if end < 0 else end
        elif text.startswith('//', i) or text.startswith('/*', i):
            end = text.find('\n' if c == '/' and text[i + 1] == '/' else '*/', i + 2)
            end = n if end < 0 else (end if text[i + 1] == '/' else end + 2)
        elif (c == 'R' and RAW_STRING.match(text, i) and
              not (text[i - 1:i].isalnum() or text[i - 1:i] == '_')):
            delim = ')' + RAW_STRING.match(text, i).group(1) + '"'
            end = text.find(delim, i) + len(delim)
        elif c == '"' or (c == "'" and not text[i - 1:i].isalnum()):
            end = i + 1
            while end < n and text[end] != c:
                end += 2 if text[end] == '\\' else 1
            end += 1
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r'[^\n]', ' ', text[i:end]))
        i = end
    return ''.join(out)


def long_functions(path, text):
    """(length, path, line, head) for each function body in `text` over LIMIT:
    a `{` opened where only namespaces and classes enclose it, after a
    statement with a parameter list and no `=` before it."""
    code = code_only(text)
    found, stack, stmt_start = [], [], 0
    for pos, c in enumerate(code):
        if c in ';{}':
            stmt = ' '.join(code[stmt_start:pos].split())
            stmt_start = pos + 1
        if c == '{':
            at_scope = all(kind == 'scope' for kind, _, _ in stack)
            if SCOPE.match(stmt):
                kind = 'scope'
            elif at_scope and '(' in stmt and '=' not in stmt.split('(')[0]:
                kind = 'function'
            else:
                kind = 'inner'
            stack.append((kind, code.count('\n', 0, pos), stmt))
        elif c == '}' and stack:
            kind, open_line, head = stack.pop()
            body = code.count('\n', 0, pos) - open_line - 1
            if kind == 'function' and body > LIMIT:
                found.append((body, path, open_line + 1, head[:90]))
    return found


def check_tree(root):
    found = []
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if name.endswith(('.cc', '.h')):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding='utf-8') as f:
                        found += long_functions(os.path.relpath(path, root), f.read())
    return sorted(found, reverse=True)


def self_test():
    """The checker finds a 71-line body and passes a 70-line one."""
    def body(n):
        return ['  int x = %d;' % k for k in range(n)]
    cases = {
        'long.cc': ['int Long(int a) {'] + body(LIMIT + 1) + ['}'],
        'ok.cc': ['int Fits(int a,', '         int b) {'] + body(LIMIT) + ['}'],
        'member.h': ['namespace n {', 'class C {', ' public:', '  void M() const {'] +
                    ['    int y;'] * (LIMIT + 1) + ['  }', '};', '}  // namespace n'],
        'test.cc': ['#include <x>', 'TEST(Suite, Name) {'] + body(LIMIT + 5) + ['}'],
        'ctor.cc': ['C::C(int x)', '    : x_(x) {'] + body(LIMIT + 2) + ['}'],
        # Braces in a raw string, a string, a character and a comment are not code.
        'literals.cc': ['void L() {', '  const char* r = R"x(}})x";', '  char c = \'}\';',
                        '  f("}");  // }'] + body(LIMIT - 2) + ['}'],
        # A table is not a function, nor is a lambda's body at namespace scope.
        'table.cc': (['const int kT[] = {'] + ['  1,'] * 100 + ['};'] +
                     ['auto f = [](int a) {'] + body(100) + ['};']),
    }
    want = {'long.cc': LIMIT + 1, 'member.h': LIMIT + 1, 'test.cc': LIMIT + 5,
            'ctor.cc': LIMIT + 2, 'literals.cc': LIMIT + 1}
    with tempfile.TemporaryDirectory() as root:
        os.mkdir(os.path.join(root, 'fabric'))
        for name, lines in cases.items():
            with open(os.path.join(root, 'fabric', name), 'w', encoding='utf-8') as f:
                f.write('\n'.join(lines) + '\n')
        got = {os.path.basename(p): n for n, p, _, _ in check_tree(root)}
    if got != want:
        print('function_length self-test FAILED: found %s, want %s' % (got, want))
        return 1
    print('function_length self-test: the %d long bodies found, nothing else' % len(got))
    return 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
    found = check_tree(root)
    for n, path, line, head in found:
        print('%s:%d: %d lines (limit %d): %s' % (path, line, n, LIMIT, head))
    if found:
        print('%d function(s) over %d lines: split each into helpers that each do one '
              'thing, with a comment saying what (see alloc_chain.h)' % (len(found), LIMIT))
        return 1
    print('function_length: every function body is at most %d lines' % LIMIT)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
