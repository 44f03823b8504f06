// Walks a template tree with Jinja's scoping: a for loop's body and a macro's body see their own
// variables first; `set` outside them writes the template's; namespaces are how a loop hands a
// value out, as in Jinja.
#include "jinja/template.h"

#include <cmath>

#include "dsx/error.h"
#include "jinja/builtins.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"

namespace dsx::jinja {
namespace {

[[noreturn]] void fail(int line, const std::string& what) {
  throw Error(ErrorKind::Format, "line " + std::to_string(line) + ": " + what);
}

bool mentions_generation(const Body& body) {
  for (const auto& s : body) {
    if (s->kind == Stmt::Kind::Generation) return true;
    for (const auto& b : s->bodies)
      if (mentions_generation(b)) return true;
  }
  return false;
}

struct Scope {
  Dict vars;
  Scope* parent = nullptr;
};

enum class Flow { Next, Break, Continue };

// Python's arithmetic on two numbers (ints stay ints but for "/").
Value arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
  const bool floats = a.kind() == Value::Kind::Float || b.kind() == Value::Kind::Float;
  if (op == "/") {
    if (b.as_float() == 0) fail(line, "division by zero");
    return a.as_float() / b.as_float();
  }
  if (floats) {
    const double x = a.as_float(), y = b.as_float();
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (op == "**") return std::pow(x, y);
    if (y == 0) fail(line, "division by zero");
    if (op == "//") return std::floor(x / y);
    return x - y * std::floor(x / y);  // %: the sign of the divisor, as Python
  }
  const int64_t x = a.as_int(), y = b.as_int();
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (op == "**") {
    if (y < 0) return std::pow(static_cast<double>(x), static_cast<double>(y));
    int64_t r = 1;
    for (int64_t i = 0; i < y; ++i) r *= x;
    return r;
  }
  if (y == 0) fail(line, "division by zero");
  int64_t q = x / y, r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;
  return op == "//" ? q : r;
}

Value repeat(const Value& sequence, int64_t times) {
  if (sequence.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += sequence.as_string();
    return out;
  }
  List out;
  for (int64_t i = 0; i < times; ++i)
    out.insert(out.end(), sequence.as_list().begin(), sequence.as_list().end());
  return out;
}

bool contains(const Value& container, const Value& item, int line) {
  if (container.is_string()) {
    if (!item.is_string()) fail(line, "'in <string>' needs a string on its left");
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) return item.is_string() && container.as_dict().find(item.as_string());
  if (container.is_list()) {
    for (const auto& v : container.as_list())
      if (equal(v, item)) return true;
    return false;
  }
  if (container.is_undefined()) return false;
  fail(line, std::string("'in' needs a string, list or dict on its right, not ") + container.type_name());
}

// Python's slice of n items: the indices it takes.
std::vector<size_t> slice_indices(int64_t n, const Value& start, const Value& stop, const Value& step, int line) {
  const int64_t s = step.is_undefined() || step.is_none() ? 1 : step.as_int();
  if (s == 0) fail(line, "slice step cannot be zero");
  auto bound = [&](const Value& v, int64_t fallback) {
    if (v.is_undefined() || v.is_none()) return fallback;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    return s > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t from = bound(start, s > 0 ? 0 : n - 1), to = bound(stop, s > 0 ? n : -1);
  std::vector<size_t> out;
  for (int64_t i = from; s > 0 ? i < to : i > to; i += s) out.push_back(static_cast<size_t>(i));
  return out;
}

class Renderer {
 public:
  Renderer(const Dict& variables, Rendered& out) : out_(out) {
    globals_.vars = globals();
    for (const auto& [k, v] : variables.items) globals_.vars.set(k, v);
  }

  void run(const Body& body) { exec(body, globals_); }

 private:
  Flow exec(const Body& body, Scope& scope) {
    for (const auto& s : body) {
      const Flow flow = exec(*s, scope);
      if (flow != Flow::Next) return flow;
    }
    return Flow::Next;
  }

  Flow exec(const Stmt& s, Scope& scope) {
    try {
      return run_statement(s, scope);
    } catch (const Error& error) {
      rethrow_at(s.line, error);
    }
  }

  // An error from inside the renderer gets the line it happened on, once.
  [[noreturn]] static void rethrow_at(int line, const Error& error) {
    const std::string what = error.what();
    if (what.rfind("line ", 0) == 0 || what.rfind("raise_exception: ", 0) == 0) throw error;
    fail(line, what);
  }

  Flow run_statement(const Stmt& s, Scope& scope) {
    switch (s.kind) {
      case Stmt::Kind::Text: out_.text += s.text; return Flow::Next;
      case Stmt::Kind::Output: out_.text += eval(*s.expr, scope).str(); return Flow::Next;
      case Stmt::Kind::If:
        for (size_t i = 0; i < s.conditions.size(); ++i)
          if (eval(*s.conditions[i], scope).truthy()) return exec(s.bodies[i], scope);
        return s.bodies.size() > s.conditions.size() ? exec(s.bodies.back(), scope) : Flow::Next;
      case Stmt::Kind::For: return loop(s, scope);
      case Stmt::Kind::Set: assign(s, eval(*s.expr, scope), scope); return Flow::Next;
      case Stmt::Kind::SetBlock: assign(s, capture(s.bodies[0], scope), scope); return Flow::Next;
      case Stmt::Kind::Macro: scope.vars.set(s.targets[0], macro(s)); return Flow::Next;
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
      case Stmt::Kind::Generation: {
        const size_t start = out_.text.size();
        const Flow flow = exec(s.bodies[0], scope);
        out_.generation.emplace_back(start, out_.text.size());
        return flow;
      }
      case Stmt::Kind::FilterBlock: {
        const Value body = capture(s.bodies[0], scope);
        CallArgs args = arguments(*s.filter, 1, scope);
        out_.text += apply_filter(s.filter->name, body, args).str();
        return Flow::Next;
      }
    }
    return Flow::Next;
  }

  // What `body` writes, as a string, not added to the output.
  Value capture(const Body& body, Scope& scope) {
    std::string saved = std::move(out_.text);
    out_.text.clear();
    exec(body, scope);
    std::string text = std::move(out_.text);
    out_.text = std::move(saved);
    return text;
  }

  void assign(const Stmt& s, Value value, Scope& scope) {
    if (!s.attribute.empty()) {
      const Value ns = lookup(s.targets[0], scope);
      if (!ns.is_namespace())
        fail(s.line, "'set " + s.targets[0] + "." + s.attribute + "' needs " + s.targets[0] +
                         " to be a namespace(), not " + ns.type_name());
      ns.mutable_dict().set(s.attribute, std::move(value));
      return;
    }
    bind_targets(s, value, scope);
  }

  Flow loop(const Stmt& s, Scope& scope) {
    List items;
    for (const Value& item : iterate(eval(*s.expr, scope))) {
      if (!s.filter) {
        items.push_back(item);
        continue;
      }
      Scope probe{{}, &scope};
      bind_targets(s, item, probe);
      if (eval(*s.filter, probe).truthy()) items.push_back(item);
    }
    if (items.empty()) return s.bodies.size() > 1 ? exec(s.bodies[1], scope) : Flow::Next;
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      Scope body{{}, &scope};
      bind_targets(s, items[i], body);
      body.vars.set("loop", loop_info(items, i));
      if (exec(s.bodies[0], body) == Flow::Break) break;
    }
    return Flow::Next;
  }

  // `set a, b = ...` and `for a, b in ...` unpack a list into their names.
  void bind_targets(const Stmt& s, const Value& item, Scope& scope) {
    if (s.targets.size() == 1) {
      scope.vars.set(s.targets[0], item);
      return;
    }
    const List parts = iterate(item);
    if (parts.size() != s.targets.size())
      fail(s.line, "cannot unpack " + std::to_string(parts.size()) + " values into " +
                       std::to_string(s.targets.size()) + " names");
    for (size_t i = 0; i < parts.size(); ++i) scope.vars.set(s.targets[i], parts[i]);
  }

  static Value loop_info(const List& items, int64_t i) {
    const int64_t n = static_cast<int64_t>(items.size());
    Dict loop;
    loop.set("index", i + 1);
    loop.set("index0", i);
    loop.set("revindex", n - i);
    loop.set("revindex0", n - i - 1);
    loop.set("first", i == 0);
    loop.set("last", i == n - 1);
    loop.set("length", n);
    if (i > 0) loop.set("previtem", items[static_cast<size_t>(i - 1)]);
    if (i + 1 < n) loop.set("nextitem", items[static_cast<size_t>(i + 1)]);
    loop.set("cycle", Function([i](const CallArgs& args) {
               if (args.positional.empty()) return Value();
               return args.positional[static_cast<size_t>(i) % args.positional.size()];
             }));
    return loop;
  }

  Value macro(const Stmt& s) {
    return Function([this, &s](const CallArgs& args) {
      Scope scope{{}, &globals_};
      for (size_t p = 1; p < s.targets.size(); ++p) {
        Value v = args.get(p - 1, s.targets[p]);
        if (v.is_undefined() && s.defaults[p - 1]) v = eval(*s.defaults[p - 1], scope);
        scope.vars.set(s.targets[p], v);
      }
      return capture(s.bodies[0], scope);
    });
  }

  Value lookup(const std::string& name, const Scope& scope) const {
    for (const Scope* at = &scope; at; at = at->parent)
      if (const Value* v = at->vars.find(name)) return *v;
    return Value();
  }

  CallArgs arguments(const Expr& e, size_t first, Scope& scope) {
    CallArgs args;
    for (size_t i = first; i < e.args.size(); ++i) {
      Value v = eval(*e.args[i], scope);
      const std::string& keyword = e.names[i - first];
      if (keyword.empty()) args.positional.push_back(std::move(v));
      else args.named.emplace_back(keyword, std::move(v));
    }
    return args;
  }

  Value eval(const Expr& e, Scope& scope) {
    try {
      return evaluate(e, scope);
    } catch (const Error& error) {
      rethrow_at(e.line, error);
    }
  }

  Value evaluate(const Expr& e, Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: return lookup(e.name, scope);
      case Expr::Kind::List: {
        List list;
        for (const auto& a : e.args) list.push_back(eval(*a, scope));
        return list;
      }
      case Expr::Kind::Dict: {
        Dict dict;
        for (size_t i = 0; i < e.args.size(); i += 2) {
          const Value key = eval(*e.args[i], scope);
          if (!key.is_string()) fail(e.line, "dict keys must be strings here");
          dict.set(key.as_string(), eval(*e.args[i + 1], scope));
        }
        return dict;
      }
      case Expr::Kind::Attr: return attribute(eval(*e.args[0], scope), e.name, e);
      case Expr::Kind::Index: return item(eval(*e.args[0], scope), eval(*e.args[1], scope), e);
      case Expr::Kind::Slice: return slice(e, scope);
      case Expr::Kind::Call: {
        const Value callee = eval(*e.args[0], scope);
        if (!callee.is_callable()) fail(e.line, describe_callee(*e.args[0]) + " is not a function");
        return callee.as_function()(arguments(e, 1, scope));
      }
      case Expr::Kind::Filter:
        return apply_filter(e.name, eval(*e.args[0], scope), arguments(e, 1, scope));
      case Expr::Kind::Test: {
        if (e.name == "defined" || e.name == "undefined") {
          const bool defined = !eval(*e.args[0], scope).is_undefined();
          return (e.name == "defined" ? defined : !defined) != e.negated;
        }
        return apply_test(e.name, eval(*e.args[0], scope), arguments(e, 1, scope)) != e.negated;
      }
      case Expr::Kind::Unary: return unary(e, eval(*e.args[0], scope));
      case Expr::Kind::Binary: return binary(e, scope);
      case Expr::Kind::Cond:
        if (eval(*e.args[1], scope).truthy()) return eval(*e.args[0], scope);
        return e.args[2] ? eval(*e.args[2], scope) : Value();
    }
    return Value();
  }

  static std::string describe_callee(const Expr& e) {
    if (e.kind == Expr::Kind::Name) return "'" + e.name + "'";
    if (e.kind == Expr::Kind::Attr) return "'." + e.name + "'";
    return "the called value";
  }

  static Value attribute(const Value& object, const std::string& name, const Expr& e) {
    if (object.is_undefined())
      fail(e.line, "cannot read '." + name + "' of an undefined value" + named(*e.args[0]));
    if (object.is_dict() && !object.is_namespace()) {
      Value method = method_of(object, name);
      if (!method.is_undefined()) return method;
    }
    if (object.is_dict()) {
      const Value* v = object.as_dict().find(name);
      return v ? *v : Value();
    }
    return method_of(object, name);
  }

  static std::string named(const Expr& e) {
    return e.kind == Expr::Kind::Name ? " ('" + e.name + "' is undefined)" : "";
  }

  static Value item(const Value& object, const Value& key, const Expr& e) {
    if (object.is_undefined()) fail(e.line, "cannot index an undefined value" + named(*e.args[0]));
    if (object.is_dict()) {
      if (!key.is_string()) return Value();
      const Value* v = object.as_dict().find(key.as_string());
      return v ? *v : attribute(object, key.as_string(), e);
    }
    if ((object.is_list() || object.is_string()) && key.kind() == Value::Kind::Int) {
      const List items = iterate(object);
      int64_t i = key.as_int();
      if (i < 0) i += static_cast<int64_t>(items.size());
      if (i < 0 || i >= static_cast<int64_t>(items.size())) return Value();
      return items[static_cast<size_t>(i)];
    }
    if (key.is_string()) return attribute(object, key.as_string(), e);
    return Value();
  }

  Value slice(const Expr& e, Scope& scope) {
    const Value object = eval(*e.args[0], scope);
    Value bounds[3];
    for (int i = 0; i < 3; ++i)
      if (e.args[1 + i]) bounds[i] = eval(*e.args[1 + i], scope);
    if (!object.is_list() && !object.is_string())
      fail(e.line, std::string("cannot slice a ") + object.type_name());
    const List items = iterate(object);
    List out;
    for (size_t i : slice_indices(static_cast<int64_t>(items.size()), bounds[0], bounds[1], bounds[2], e.line))
      out.push_back(items[i]);
    if (!object.is_string()) return out;
    std::string text;
    for (const auto& c : out) text += c.as_string();
    return text;
  }

  static Value unary(const Expr& e, const Value& v) {
    if (e.name == "not") return !v.truthy();
    if (!v.is_number()) fail(e.line, "unary '" + e.name + "' needs a number, not " + v.type_name());
    if (e.name == "+") return v;
    if (v.kind() == Value::Kind::Float) return -v.as_float();
    return -v.as_int();
  }

  Value binary(const Expr& e, Scope& scope) {
    const std::string& op = e.name;
    const Value a = eval(*e.args[0], scope);
    if (op == "and") return a.truthy() ? eval(*e.args[1], scope) : a;
    if (op == "or") return a.truthy() ? a : eval(*e.args[1], scope);
    const Value b = eval(*e.args[1], scope);
    if (op == "~") return a.str() + b.str();
    if (op == "==") return equal(a, b);
    if (op == "!=") return !equal(a, b);
    if (op == "<") return less(a, b);
    if (op == ">") return less(b, a);
    if (op == "<=") return !less(b, a);
    if (op == ">=") return !less(a, b);
    if (op == "in") return contains(b, a, e.line);
    if (op == "not in") return !contains(b, a, e.line);
    if (a.is_number() && b.is_number()) return arithmetic(op, a, b, e.line);
    if (op == "+" && a.is_string() && b.is_string()) return a.as_string() + b.as_string();
    if (op == "+" && a.is_list() && b.is_list()) {
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return out;
    }
    if (op == "*" && (a.is_string() || a.is_list()) && b.kind() == Value::Kind::Int) return repeat(a, b.as_int());
    if (op == "*" && (b.is_string() || b.is_list()) && a.kind() == Value::Kind::Int) return repeat(b, a.as_int());
    fail(e.line, "cannot apply '" + op + "' to " + a.type_name() + " and " + b.type_name());
  }

  Rendered& out_;
  Scope globals_;
};

}  // namespace

Template::Template(const std::string& source)
    : body_(parse(lex(source))), has_generation_(mentions_generation(body_)) {}

Rendered Template::render(const Dict& variables) const {
  Rendered out;
  Renderer(variables, out).run(body_);
  return out;
}

}  // namespace dsx::jinja
