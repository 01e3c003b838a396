// Jinja interpreter: statements and scoping (see jinja_interpreter.hpp).
// Expression evaluation is in jinja_eval.cpp, globals in jinja_globals.cpp;
// the shared class is declared in jinja_interp_state.hpp.
#include "model/jinja_interpreter.hpp"

#include "model/jinja_filters.hpp"
#include "model/jinja_interp_state.hpp"

namespace pagoda::model::jinja {

Error Interpreter::with_line(const Error& e, int line) const {
  static const std::string kPrefix = "template error at line ";
  if (raised_ || e.message.rfind(kPrefix, 0) == 0) return e;
  return make_error(kPrefix + std::to_string(line) + ": " + e.message);
}

Value Interpreter::lookup_from(const Frame* f, const std::string& name) const {
  for (; f; f = f->parent.get()) {
    const auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  const auto it = context_.find(name);
  if (it != context_.end()) return it->second;
  return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::lookup(const std::string& name) const { return lookup_from(frame_.get(), name); }

std::shared_ptr<Frame> Interpreter::make_frame(const FrameSymbols& syms,
                                               std::shared_ptr<Frame> parent) const {
  auto f = std::make_shared<Frame>();
  for (const auto& [name, kind] : syms.slots) {
    Value v = Value::undefined("'" + name + "' is undefined");
    if (kind == LoadKind::kResolve) {
      const auto it = context_.find(name);
      if (it != context_.end()) v = it->second;
    } else if (kind == LoadKind::kAlias) {
      v = lookup_from(parent.get(), name);
    }
    f->vars[name] = std::move(v);
  }
  f->parent = std::move(parent);
  return f;
}

Result<void> Interpreter::bind_target(const Target& t, const Value& v) {
  if (!t.attr.empty()) {
    const Value ns = lookup(t.names[0]);
    if (!ns.is_object() || ns.object().type_name != "Namespace") {
      return make_error("cannot assign attribute on non-namespace object");
    }
    if (t.attr[0] == '_') {
      return make_error("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
                        t.attr + "'. Please rename the attribute.");
    }
    ns.object().attrs.set(Value::string(t.attr), v);
    return {};
  }
  if (!t.is_tuple) {
    frame_->vars[t.names[0]] = v;
    return {};
  }
  auto parts = iterate(v);
  if (!parts) return parts.error();
  const size_t want = t.names.size();
  if (parts->size() > want) return make_error("too many values to unpack (expected " + std::to_string(want) + ")");
  if (parts->size() < want) {
    return make_error("not enough values to unpack (expected " + std::to_string(want) + ", got " +
                      std::to_string(parts->size()) + ")");
  }
  for (size_t i = 0; i < want; ++i) frame_->vars[t.names[i]] = (*parts)[i];
  return {};
}

Result<Flow> Interpreter::exec_body(const Body& body, std::string& out) {
  for (const auto& s : body) {
    auto r = exec(*s, out);
    if (!r || *r != Flow::kNormal) return r;
  }
  return Flow::kNormal;
}

Result<Flow> Interpreter::exec(const Stmt& s, std::string& out) {
  auto r = exec_statement(s, out);
  if (!r) return with_line(r.error(), s.line);
  return r;
}

Result<Flow> Interpreter::exec_statement(const Stmt& s, std::string& out) {
  switch (s.kind) {
    case StmtKind::kText:
      out += s.text;
      return Flow::kNormal;
    case StmtKind::kOutput:
      for (const auto& e : s.exprs) {
        auto v = eval(*e);
        if (!v) return v.error();
        auto text = printable(*v);
        if (!text) return text.error();
        out += *text;
      }
      return Flow::kNormal;
    case StmtKind::kIf:
      for (const IfBranch& br : s.branches) {
        auto c = eval(*br.cond);
        if (!c) return c.error();
        if (truthy(*c)) return exec_body(br.body, out);
      }
      return exec_body(s.else_body, out);
    case StmtKind::kFor: return exec_for(s, out);
    case StmtKind::kSet: {
      auto v = eval(*s.expr);
      if (!v) return v.error();
      if (auto r = bind_target(s.target, *v); !r) return r.error();
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock:
    case StmtKind::kFilterBlock: return exec_capture(s, out);
    case StmtKind::kMacro: define_macro(s); return Flow::kNormal;
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kGeneration: {
      FrameGuard guard(*this, make_frame(s.frame, frame_));
      return exec_body(s.body, out);
    }
  }
  return Flow::kNormal;
}

Result<Flow> Interpreter::exec_capture(const Stmt& s, std::string& out) {
  Value v;
  {
    FrameGuard guard(*this, make_frame(s.frame, frame_));
    std::string captured;
    auto r = exec_body(s.body, captured);
    if (!r) return r;
    v = Value::string(std::move(captured));
    if (s.expr) {  // the filter runs in the block's frame, as in jinja2
      auto f = eval_filter_chain(*s.expr, v);
      if (!f) return f.error();
      v = *f;
    }
  }
  if (s.kind == StmtKind::kFilterBlock) {
    auto text = printable(v);
    if (!text) return text.error();
    out += *text;
    return Flow::kNormal;
  }
  if (auto r = bind_target(s.target, v); !r) return r.error();
  return Flow::kNormal;
}

namespace {

struct LoopState {
  int64_t index0 = 0;
  bool has_last = false;
  Value last_changed;
};

// loop.cycle and loop.changed, sharing the loop's position.
void add_loop_methods(Object& loop, const std::shared_ptr<LoopState>& st) {
  auto cycle = std::make_shared<Callable>();
  cycle->name = "cycle";
  cycle->fn = [st](const CallArgs& a) -> Result<Value> {
    if (a.args.empty()) return make_error("no items for cycling given");
    return a.args[static_cast<size_t>(st->index0) % a.args.size()];
  };
  auto changed = std::make_shared<Callable>();
  changed->name = "changed";
  changed->fn = [st](const CallArgs& a) -> Result<Value> {
    const Value v = Value::list(a.args);
    if (st->has_last && equals(v, st->last_changed)) return Value::boolean(false);
    st->has_last = true;
    st->last_changed = v;
    return Value::boolean(true);
  };
  loop.attrs.set(Value::string("cycle"), Value::callable(std::move(cycle)));
  loop.attrs.set(Value::string("changed"), Value::callable(std::move(changed)));
}

void update_loop(Object& loop, const std::vector<Value>& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto k = static_cast<int64_t>(i);
  auto set = [&](const char* name, Value v) { loop.attrs.set(Value::string(name), std::move(v)); };
  set("index", Value::integer(k + 1));
  set("index0", Value::integer(k));
  set("revindex", Value::integer(n - k));
  set("revindex0", Value::integer(n - k - 1));
  set("first", Value::boolean(k == 0));
  set("last", Value::boolean(k == n - 1));
  set("length", Value::integer(n));
  set("depth", Value::integer(1));
  set("depth0", Value::integer(0));
  set("previtem", k > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
  set("nextitem", k + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
}

}  // namespace

Result<Flow> Interpreter::exec_for(const Stmt& s, std::string& out) {
  auto seq = eval(*s.expr);
  if (!seq) return seq.error();
  auto all = iterate(*seq);
  if (!all) return all.error();
  std::vector<Value> items;
  if (s.cond) {
    for (const Value& item : *all) {
      FrameGuard guard(*this, make_frame(s.test_frame, frame_));
      if (auto r = bind_target(s.target, item); !r) return r.error();
      auto c = eval(*s.cond);
      if (!c) return c.error();
      if (truthy(*c)) items.push_back(item);
    }
  } else {
    items = std::move(*all);
  }
  if (items.empty()) {
    FrameGuard guard(*this, make_frame(s.else_frame, frame_));
    auto r = exec_body(s.else_body, out);
    if (!r) return r;
    return Flow::kNormal;
  }
  auto loop = std::make_shared<Object>();
  loop->type_name = "LoopContext";
  auto state = std::make_shared<LoopState>();
  update_loop(*loop, items, 0);
  add_loop_methods(*loop, state);
  const Value loop_value = Value::object(loop);
  for (size_t i = 0; i < items.size(); ++i) {
    state->index0 = static_cast<int64_t>(i);
    update_loop(*loop, items, i);
    FrameGuard guard(*this, make_frame(s.frame, frame_));
    if (auto r = bind_target(s.target, items[i]); !r) return r.error();
    frame_->vars["loop"] = loop_value;
    auto r = exec_body(s.body, out);
    if (!r) return r;
    if (*r == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interpreter::define_macro(const Stmt& s) {
  auto c = std::make_shared<Callable>();
  c->name = s.name;
  std::weak_ptr<Frame> closure = frame_;
  c->fn = [this, stmt = &s, closure](const CallArgs& a) { return call_macro(*stmt, closure.lock(), a); };
  frame_->vars[s.name] = Value::callable(std::move(c));
}

Result<Value> Interpreter::call_macro(const Stmt& m, std::shared_ptr<Frame> closure, const CallArgs& a) {
  if (depth_ > 100) return make_error("maximum macro recursion depth exceeded");
  const size_t np = m.params.size();
  if (a.args.size() > np) {
    return make_error("macro '" + m.name + "' takes not more than " + std::to_string(np) + " argument(s)");
  }
  auto f = make_frame(m.frame, closure ? closure : frame_);
  std::vector<bool> bound(np, false);
  for (size_t i = 0; i < a.args.size(); ++i) {
    f->vars[m.params[i]] = a.args[i];
    bound[i] = true;
  }
  for (const auto& [k, v] : a.kwargs) {
    size_t i = 0;
    while (i < np && m.params[i] != k) ++i;
    if (i == np) return make_error("macro '" + m.name + "' takes no keyword argument '" + k + "'");
    if (bound[i]) return make_error("macro '" + m.name + "' got multiple values for argument '" + k + "'");
    f->vars[k] = v;
    bound[i] = true;
  }
  FrameGuard guard(*this, f);
  const size_t first_default = np - m.defaults.size();
  for (size_t i = 0; i < np; ++i) {
    if (bound[i]) continue;
    if (i < first_default) {
      f->vars[m.params[i]] = Value::undefined("parameter '" + m.params[i] + "' was not provided");
      continue;
    }
    auto d = eval(*m.defaults[i - first_default]);
    if (!d) return d.error();
    f->vars[m.params[i]] = *d;
  }
  std::string out;
  ++depth_;
  auto r = exec_body(m.body, out);
  --depth_;
  if (!r) return r.error();
  return Value::string(std::move(out));
}

Result<std::string> Interpreter::run(const Template& t, const Dict& context) {
  install_globals(context_);
  for (const auto& [k, v] : context.entries()) {
    if (!k.is_string()) return make_error("context keys must be strings");
    context_[k.str()] = v;
  }
  frame_ = make_frame(t.frame, nullptr);
  std::string out;
  auto r = exec_body(t.body, out);
  for (const auto& o : objects_) o->attrs = Dict();  // break reference cycles
  objects_.clear();
  frame_.reset();
  context_.clear();
  if (!r) return r.error();
  return out;
}

Result<std::string> render(const Template& tmpl, const Dict& context, const RenderOptions& options) {
  Interpreter interp(options);
  return interp.run(tmpl, context);
}

}  // namespace pagoda::model::jinja
