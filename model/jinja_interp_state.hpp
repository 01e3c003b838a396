// Internal to the Jinja interpreter (jinja_interpreter.cpp, jinja_eval.cpp,
// jinja_globals.cpp): scopes and the interpreter class. Not for use elsewhere.
//
// Ownership: frames are shared_ptrs (a loop iteration or macro call pushes a
// child frame whose parent is the enclosing one). A frame holds the names its
// FrameSymbols declare; names no frame declares come from context_. Macros hold a weak_ptr to
// their defining frame, so frames and macros never form a cycle. Objects
// (namespaces) created during a render are registered in objects_ and their
// attributes cleared when the render ends, which breaks any cycle a template
// builds through namespace attributes.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpu/result.hpp"
#include "model/jinja_interpreter.hpp"

namespace pagoda::model::jinja {

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};

enum class Flow { kNormal, kBreak, kContinue };

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& options) : options_(options) {}
  Result<std::string> run(const Template& t, const Dict& context);

 private:
  friend class FrameGuard;

  // Statements (jinja_interpreter.cpp).
  Result<Flow> exec_body(const Body& body, std::string& out);
  Result<Flow> exec(const Stmt& s, std::string& out);
  Result<Flow> exec_statement(const Stmt& s, std::string& out);
  Result<Flow> exec_for(const Stmt& s, std::string& out);
  Result<Flow> exec_capture(const Stmt& s, std::string& out);
  void define_macro(const Stmt& s);
  Result<Value> call_macro(const Stmt& m, std::shared_ptr<Frame> closure, const CallArgs& a);
  Result<void> bind_target(const Target& t, const Value& v);
  Value lookup(const std::string& name) const;
  Value lookup_from(const Frame* f, const std::string& name) const;
  // A frame for `syms` (initialized as FrameSymbols describes) under `parent`.
  std::shared_ptr<Frame> make_frame(const FrameSymbols& syms, std::shared_ptr<Frame> parent) const;
  Error with_line(const Error& e, int line) const;

  // Expressions (jinja_eval.cpp).
  // str(v) for output; functions and generators are refused, as jinja2 would
  // print their memory address.
  static Result<std::string> printable(const Value& v);
  Result<Value> eval(const Expr& e);
  Result<Value> eval_getitem(const Expr& e);
  Result<Value> eval_collection(const Expr& e);
  Result<Value> eval_operator(const Expr& e);
  Result<Value> eval_concat(const Expr& e);
  Result<Value> eval_filter_or_test(const Expr& e);
  Result<Value> eval_compare(const Expr& e);
  Result<Value> eval_call(const Expr& e);
  Result<CallArgs> eval_args(const Expr& e, size_t first);
  // Applies a filter chain whose innermost subject is null (filter blocks).
  Result<Value> eval_filter_chain(const Expr& f, const Value& hole);

  // Globals (jinja_globals.cpp).
  void install_globals(std::unordered_map<std::string, Value>& vars);

  RenderOptions options_;
  std::unordered_map<std::string, Value> context_;  // globals, then the render variables
  std::shared_ptr<Frame> frame_;
  std::vector<std::shared_ptr<Object>> objects_;
  bool raised_ = false;
  int depth_ = 0;
};

// Makes `f` the current frame until the guard ends.
class FrameGuard {
 public:
  FrameGuard(Interpreter& in, std::shared_ptr<Frame> f) : in_(in), saved_(in.frame_) {
    in_.frame_ = std::move(f);
  }
  ~FrameGuard() { in_.frame_ = std::move(saved_); }
  FrameGuard(const FrameGuard&) = delete;
  FrameGuard& operator=(const FrameGuard&) = delete;

 private:
  Interpreter& in_;
  std::shared_ptr<Frame> saved_;
};

}  // namespace pagoda::model::jinja
