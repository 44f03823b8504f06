// The parsed form of a template: expressions and statements as plain trees the renderer walks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jinja/value.h"

namespace dsx::jinja {

struct Expr {
  enum class Kind {
    Literal,  // value
    Name,     // name
    List,     // args
    Dict,     // args: key, value, key, value, ...
    Attr,     // args[0].name
    Index,    // args[0][args[1]]
    Slice,    // args[0][args[1]:args[2]:args[3]], each bound may be null
    Call,     // args[0](args[1..], names: the keyword of each argument, "" when positional)
    Filter,   // args[0] | name(args[1..]); names as for Call
    Test,     // args[0] is [not] name(args[1..]); negated
    Unary,    // op args[0]: "-", "+", "not"
    Binary,   // args[0] op args[1]: arithmetic, "~", comparisons, "in", "not in", "and", "or"
    Cond,     // args[0] if args[1] else args[2] (args[2] null: undefined)
  };
  Kind kind;
  int line = 0;
  std::string name;  // Name, Attr, Call/Filter/Test name, operator
  Value value;
  bool negated = false;
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::string> names;  // keyword of each call argument after the callee
};
using ExprPtr = std::unique_ptr<Expr>;

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    Text,        // text
    Output,      // {{ expr }}
    If,          // conditions[i] -> bodies[i]; bodies.back() the else when one more than conditions
    For,         // for targets in expr [if filter]: bodies[0], else bodies[1]
    Set,         // set targets = expr (targets: names, or "ns" + attribute)
    SetBlock,    // set targets[0] %}bodies[0]{% endset
    Macro,       // macro targets[0](targets[1..] = defaults) bodies[0]
    Break,
    Continue,
    Generation,  // {% generation %}bodies[0]{% endgeneration %}: the assistant's part
    FilterBlock, // {% filter expr %}: expr's filter applied to bodies[0]
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr, filter;
  std::vector<std::string> targets;
  std::string attribute;  // Set on a namespace: targets[0].attribute
  std::vector<ExprPtr> conditions, defaults;
  std::vector<Body> bodies;
};

}  // namespace dsx::jinja
