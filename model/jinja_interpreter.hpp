// Jinja interpreter: renders a parsed Template against a context, with the
// globals transformers' chat-template environment provides: range (capped at
// 100000 items like the sandbox's), namespace, dict (and dict.fromkeys),
// raise_exception and strftime_now.
//
// Scoping is jinja2's static scoping (FrameSymbols, computed at parse time
// by analyze_scopes): the template, every for-loop iteration, macro call,
// filter block, block set and generation block is a frame whose names are
// initialized on entry exactly as jinja2's generated code initializes its
// locals; assignments never leak out of a loop nor into its next iteration;
// `if` opens no frame; macros read the frame they were defined in at call
// time; namespace objects are shared mutable state, which is how templates
// carry values out of loops.
//
// Errors: raise_exception(msg) fails the render with exactly `msg`; every
// other failure (undefined misuse, type errors, sandbox violations) is an
// Error "template error at line N: <what>". Nothing is output on error.
//
// Thread-safety: render() is reentrant; concurrent renders of one Template
// are safe (the AST is read-only). Each render builds its own globals.
#pragma once

#include <ctime>
#include <optional>
#include <string>

#include "gpu/result.hpp"
#include "model/jinja_parser.hpp"
#include "model/jinja_value.hpp"

namespace pagoda::model::jinja {

struct RenderOptions {
  // What strftime_now formats; unset: the current local time.
  std::optional<std::tm> now;
};

// `context` holds the template's variables (they shadow the globals).
Result<std::string> render(const Template& tmpl, const Dict& context, const RenderOptions& options = {});

}  // namespace pagoda::model::jinja
