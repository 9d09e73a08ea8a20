#!/usr/bin/env python3
"""Writes docs/api.md's C++ example (the ```cpp block of "## C++: `client/grove_client.h`") as a
program, so that the build compiles exactly what the documentation shows (CMake target
api_md_cpp_example) and e2e_api_docs runs it against groved:

  * the block's #include lines go to the top, its statements into main() as written, with #line
    directives so that a compile error names the line of docs/api.md;
  * the one change: the address literal "localhost:8001" becomes the program's argument;
  * after the statements, the program prints what they computed (p0, r's margin, x's SHAP values
    and top features) for the test to compare with the local CLI, and exits 1 when r or x is an
    error.

usage: api_md_cpp_example.py docs/api.md OUT.cc
"""
import sys

SECTION = "## C++: `client/grove_client.h`"
ADDRESS = '"localhost:8001"'

EPILOGUE = r"""
  // What the example computed, printed for e2e_api_docs.
  if (!r.ok() || !x.ok()) {
    std::fprintf(stderr, "Predict: %s\nExplain: %s\n", r.status().ToString().c_str(),
                 x.status().ToString().c_str());
    return 1;
  }
  std::printf("prediction %.9g\n", p0);
  std::printf("margin %.9g\n", r->margin.At(0, 0));
  std::printf("shap");
  for (float v : x->values.values) std::printf(" %.9g", v);
  std::printf("\ntop");
  for (int32_t i : x->top_features) std::printf(" %d", i);
  std::printf("\n");
  return 0;
}
"""


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    doc, out = sys.argv[1], sys.argv[2]
    text = open(doc).read()
    start = text.find(SECTION)
    block = text.find("```cpp\n", start) if start >= 0 else -1
    end = text.find("\n```", block + 1) if block >= 0 else -1
    if start < 0 or block < 0 or end < 0 or text.find("\n## ", start + 1) < block:
        sys.exit(f"{doc}: no ```cpp block under {SECTION!r}")
    first_line = text.count("\n", 0, block) + 2  # 1-based line of the block's first line
    lines = text[block + len("```cpp\n"):end + 1].splitlines()
    if sum(line.count(ADDRESS) for line in lines) != 1:
        sys.exit(f"{doc}: the C++ example must name the address {ADDRESS} exactly once")
    includes = [line for line in lines if line.startswith("#include")]
    body_start = max(i for i, line in enumerate(lines) if line.startswith("#include")) + 1
    out_lines = [f"// Generated from {doc} by tests/e2e/api_md_cpp_example.py: do not edit.",
                 "#include <cstdint>", "#include <cstdio>", "#include <string>"]
    out_lines += [f'#line {first_line + lines.index(i)} "{doc}"\n{i}' for i in includes]
    out_lines += ["", "int main(int argc, char** argv) {",
                  "  if (argc != 2) {",
                  '    std::fprintf(stderr, "usage: %s HOST:PORT\\n", argv[0]);',
                  "    return 2;",
                  "  }",
                  "  const std::string grove_example_target = argv[1];",
                  f'#line {first_line + body_start} "{doc}"']
    out_lines += ["  " + line.replace(ADDRESS, "grove_example_target") if line else ""
                  for line in lines[body_start:]]
    program = "\n".join(out_lines) + EPILOGUE
    with open(out, "w") as f:
        f.write(program)


if __name__ == "__main__":
    main()
