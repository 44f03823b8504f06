// A recursive-descent parser following Jinja's grammar (see parser.h).
#include "jinja/parser.h"

#include <algorithm>
#include <initializer_list>
#include <iterator>
#include <string_view>

#include "dsx/error.h"

namespace dsx::jinja {
namespace {

ExprPtr node(Expr::Kind kind, int line, std::string name = {}) {
  auto e = std::make_unique<Expr>();
  e->kind = kind, e->line = line, e->name = std::move(name);
  return e;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Body run() {
    Body body = statements({});
    if (peek().kind != TokenKind::End) fail("'{% " + block_name() + " %}' closes no open block");
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    return t_[std::min(i_ + ahead, t_.size() - 1)];
  }
  const Token& next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::Format, "line " + std::to_string(peek().line) + ": " + what);
  }
  bool at_op(std::string_view op) const { return peek().kind == TokenKind::Op && peek().text == op; }
  bool at_name(std::string_view name) const {
    return peek().kind == TokenKind::Name && peek().text == name;
  }
  bool accept_op(std::string_view op) { return at_op(op) ? (++i_, true) : false; }
  bool accept_name(std::string_view name) { return at_name(name) ? (++i_, true) : false; }
  void expect_op(std::string_view op) {
    if (!accept_op(op)) fail("expected '" + std::string(op) + "', found " + describe(peek()));
  }
  void expect(TokenKind kind, const char* what) {
    if (peek().kind != kind) fail(std::string("expected ") + what + ", found " + describe(peek()));
    ++i_;
  }
  std::string name() {
    if (peek().kind != TokenKind::Name) fail("expected a name, found " + describe(peek()));
    return next().text;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::End: return "the end of the template";
      case TokenKind::BlockEnd: return "'%}'";
      case TokenKind::VarEnd: return "'}}'";
      case TokenKind::Text: return "text";
      case TokenKind::String: return "a string";
      default: return "'" + t.text + "'";
    }
  }
  // The statement name of the block tag at the cursor ("" when not at one).
  std::string block_name() const {
    return peek().kind == TokenKind::BlockBegin && peek(1).kind == TokenKind::Name ? peek(1).text : "";
  }

  // Statements up to a block tag named in `ends` (left at the cursor) or the end.
  Body statements(std::initializer_list<std::string_view> ends) {
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::End) {
        if (ends.size() != 0) fail("expected '{% " + std::string(*(ends.end() - 1)) + " %}' before the end of the template");
        return body;
      }
      if (t.kind == TokenKind::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text, s->line = t.line, s->text = next().text;
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Output, s->line = t.line, s->expr = expression();
        expect(TokenKind::VarEnd, "'}}'");
        body.push_back(std::move(s));
      } else {
        const std::string n = block_name();
        for (auto end : ends)
          if (n == end) return body;
        body.push_back(statement());
      }
    }
  }

  void end_tag(std::string_view name) {
    expect(TokenKind::BlockBegin, "a tag");
    if (!accept_name(name)) fail("expected '{% " + std::string(name) + " %}'");
    expect(TokenKind::BlockEnd, "'%}'");
  }

  std::unique_ptr<Stmt> statement() {
    const int line = next().line;  // BlockBegin
    if (peek().kind != TokenKind::Name) fail("expected a statement name after '{%'");
    const std::string keyword = next().text;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (keyword == "if") return if_statement(std::move(s));
    if (keyword == "for") return for_statement(std::move(s));
    if (keyword == "set") return set_statement(std::move(s));
    if (keyword == "macro") return macro_statement(std::move(s));
    if (keyword == "break" || keyword == "continue") {
      s->kind = keyword == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      expect(TokenKind::BlockEnd, "'%}'");
      return s;
    }
    if (keyword == "generation") {
      s->kind = Stmt::Kind::Generation;
      expect(TokenKind::BlockEnd, "'%}'");
      s->bodies.push_back(statements({"endgeneration"}));
      end_tag("endgeneration");
      return s;
    }
    if (keyword == "filter") {
      s->kind = Stmt::Kind::FilterBlock;
      auto input = node(Expr::Kind::Literal, line);
      s->filter = filter(std::move(input));
      expect(TokenKind::BlockEnd, "'%}'");
      s->bodies.push_back(statements({"endfilter"}));
      end_tag("endfilter");
      return s;
    }
    for (const char* refused : {"include", "import", "from", "extends", "block", "call", "with"}) {
      if (keyword == refused)
        fail("'{% " + keyword + " %}' is not supported in chat templates here (one self-contained template only)");
    }
    if (keyword.rfind("end", 0) == 0 || keyword == "elif" || keyword == "else")
      fail("'{% " + keyword + " %}' closes no open block");
    fail("unknown statement '{% " + keyword + " %}'");
  }

  std::unique_ptr<Stmt> if_statement(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::If;
    s->conditions.push_back(expression());
    expect(TokenKind::BlockEnd, "'%}'");
    while (true) {
      s->bodies.push_back(statements({"elif", "else", "endif"}));
      next();  // BlockBegin
      const std::string n = next().text;
      if (n == "elif") {
        s->conditions.push_back(expression());
        expect(TokenKind::BlockEnd, "'%}'");
      } else if (n == "else") {
        expect(TokenKind::BlockEnd, "'%}'");
        s->bodies.push_back(statements({"endif"}));
        end_tag("endif");
        return s;
      } else {
        expect(TokenKind::BlockEnd, "'%}'");
        return s;
      }
    }
  }

  std::unique_ptr<Stmt> for_statement(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::For;
    do s->targets.push_back(name());
    while (accept_op(","));
    if (!accept_name("in")) fail("expected 'in' in the for loop");
    s->expr = or_expr();  // a bare condition would be the loop's filter
    if (accept_name("if")) s->filter = expression();
    if (accept_name("recursive")) fail("recursive for loops are not supported");
    expect(TokenKind::BlockEnd, "'%}'");
    s->bodies.push_back(statements({"else", "endfor"}));
    if (block_name() == "else") {
      next(), next();
      expect(TokenKind::BlockEnd, "'%}'");
      s->bodies.push_back(statements({"endfor"}));
    }
    end_tag("endfor");
    return s;
  }

  std::unique_ptr<Stmt> set_statement(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::Set;
    s->targets.push_back(name());
    if (accept_op(".")) {
      s->attribute = name();
    } else {
      while (accept_op(",")) s->targets.push_back(name());
    }
    if (peek().kind == TokenKind::BlockEnd && s->targets.size() == 1 && s->attribute.empty()) {
      next();
      s->kind = Stmt::Kind::SetBlock;
      s->bodies.push_back(statements({"endset"}));
      end_tag("endset");
      return s;
    }
    expect_op("=");
    s->expr = tuple_or_expression();
    expect(TokenKind::BlockEnd, "'%}'");
    return s;
  }

  std::unique_ptr<Stmt> macro_statement(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::Macro;
    s->targets.push_back(name());
    expect_op("(");
    while (!accept_op(")")) {
      s->targets.push_back(name());
      s->defaults.push_back(accept_op("=") ? expression() : nullptr);
      if (!at_op(")")) expect_op(",");
    }
    expect(TokenKind::BlockEnd, "'%}'");
    s->bodies.push_back(statements({"endmacro"}));
    end_tag("endmacro");
    return s;
  }

  // a, b = ... makes a list (Python's tuple)
  ExprPtr tuple_or_expression() {
    ExprPtr first = expression();
    if (!at_op(",")) return first;
    auto list = node(Expr::Kind::List, first->line);
    list->args.push_back(std::move(first));
    while (accept_op(",")) list->args.push_back(expression());
    return list;
  }

  ExprPtr expression() {
    ExprPtr e = or_expr();
    while (at_name("if")) {
      const int line = next().line;
      auto cond = node(Expr::Kind::Cond, line);
      cond->args.push_back(std::move(e));
      cond->args.push_back(or_expr());
      cond->args.push_back(accept_name("else") ? expression() : nullptr);
      e = std::move(cond);
    }
    return e;
  }

  ExprPtr binary(ExprPtr left, std::string op, ExprPtr right) {
    auto e = node(Expr::Kind::Binary, left->line, std::move(op));
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  // A left-associative run of `operand` joined by any of `ops` (operators, or "and"/"or").
  ExprPtr chain(ExprPtr (Parser::*operand)(), std::initializer_list<std::string_view> ops) {
    ExprPtr e = (this->*operand)();
    while (true) {
      const Token& t = peek();
      const bool is_op = (t.kind == TokenKind::Op || t.kind == TokenKind::Name) &&
                         std::find(ops.begin(), ops.end(), t.text) != ops.end();
      if (!is_op) return e;
      std::string op = next().text;
      e = binary(std::move(e), std::move(op), (this->*operand)());
    }
  }
  ExprPtr or_expr() { return chain(&Parser::and_expr, {"or"}); }
  ExprPtr and_expr() { return chain(&Parser::not_expr, {"and"}); }
  ExprPtr not_expr() {
    if (at_name("not")) {
      auto e = node(Expr::Kind::Unary, next().line, "not");
      e->args.push_back(not_expr());
      return e;
    }
    return compare();
  }
  // Comparisons, "in" and "not in"; Python's chains (a < b < c) are read as (a < b) < c.
  ExprPtr compare() {
    ExprPtr e = math1();
    while (true) {
      if (at_name("not") && peek(1).kind == TokenKind::Name && peek(1).text == "in") {
        i_ += 2;
        e = binary(std::move(e), "not in", math1());
        continue;
      }
      const Token& t = peek();
      static constexpr std::string_view comparisons[] = {"==", "!=", "<", ">", "<=", ">="};
      const bool is_comparison = t.kind == TokenKind::Op &&
                                 std::find(std::begin(comparisons), std::end(comparisons), t.text) != std::end(comparisons);
      if (!is_comparison && !at_name("in")) return e;
      std::string op = next().text;
      e = binary(std::move(e), std::move(op), math1());
    }
  }
  ExprPtr math1() { return chain(&Parser::concat, {"+", "-"}); }
  ExprPtr concat() { return chain(&Parser::math2, {"~"}); }
  ExprPtr math2() { return chain(&Parser::power, {"*", "/", "//", "%"}); }
  ExprPtr power() { return chain(&Parser::unary_with_filters, {"**"}); }
  ExprPtr unary_with_filters() { return unary(true); }

  // As Jinja: `-x | f` is `(-x) | f`, filters and tests apply to the whole unary expression.
  ExprPtr unary(bool with_filters = true) {
    ExprPtr e;
    if (at_op("-") || at_op("+")) {
      e = node(Expr::Kind::Unary, peek().line, next().text);
      e->args.push_back(unary(false));
    } else {
      e = postfix(primary());
    }
    return with_filters ? postfix_filters(std::move(e)) : std::move(e);
  }

  ExprPtr primary() {
    const Token& t = peek();
    if (t.kind == TokenKind::Name) {
      next();
      auto literal = [&](Value v) {
        auto e = node(Expr::Kind::Literal, t.line);
        e->value = std::move(v);
        return e;
      };
      if (t.text == "true" || t.text == "True") return literal(true);
      if (t.text == "false" || t.text == "False") return literal(false);
      if (t.text == "none" || t.text == "None") return literal(Value::none());
      return node(Expr::Kind::Name, t.line, t.text);
    }
    if (t.kind == TokenKind::String) {
      std::string s;
      while (peek().kind == TokenKind::String) s += next().text;  // adjacent strings join
      auto e = node(Expr::Kind::Literal, t.line);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.kind == TokenKind::Int || t.kind == TokenKind::Float) {
      next();
      auto e = node(Expr::Kind::Literal, t.line);
      try {
        e->value = t.kind == TokenKind::Int ? Value(static_cast<int64_t>(std::stoll(t.text)))
                                            : Value(std::stod(t.text));
      } catch (const std::exception&) {
        fail("number '" + t.text + "' is out of range");
      }
      return e;
    }
    if (accept_op("(")) {
      if (accept_op(")")) return node(Expr::Kind::List, t.line);  // ()
      ExprPtr e = expression();
      if (at_op(",")) {
        auto list = node(Expr::Kind::List, t.line);
        list->args.push_back(std::move(e));
        while (accept_op(",") && !at_op(")")) list->args.push_back(expression());
        e = std::move(list);
      }
      expect_op(")");
      return e;
    }
    if (accept_op("[")) {
      auto list = node(Expr::Kind::List, t.line);
      while (!accept_op("]")) {
        list->args.push_back(expression());
        if (!at_op("]")) expect_op(",");
      }
      return list;
    }
    if (accept_op("{")) {
      auto dict = node(Expr::Kind::Dict, t.line);
      while (!accept_op("}")) {
        dict->args.push_back(expression());
        expect_op(":");
        dict->args.push_back(expression());
        if (!at_op("}")) expect_op(",");
      }
      return dict;
    }
    fail("expected a value, found " + describe(t));
  }

  void call_arguments(Expr& e) {  // after "(", through ")"
    while (!accept_op(")")) {
      if (peek().kind == TokenKind::Name && peek(1).kind == TokenKind::Op && peek(1).text == "=") {
        e.names.push_back(next().text);
        next();
      } else {
        e.names.emplace_back();
      }
      e.args.push_back(expression());
      if (!at_op(")")) expect_op(",");
    }
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (accept_op(".")) {
        auto attr = node(Expr::Kind::Attr, e->line, name());
        attr->args.push_back(std::move(e));
        e = std::move(attr);
      } else if (at_op("[")) {
        e = subscript(std::move(e));
      } else if (accept_op("(")) {
        auto call = node(Expr::Kind::Call, e->line);
        call->args.push_back(std::move(e));
        call_arguments(*call);
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr e) {
    next();  // [
    ExprPtr bounds[3];
    int colons = 0;
    while (!at_op("]")) {
      if (accept_op(":")) {
        if (++colons > 2) fail("a slice takes at most start:stop:step");
      } else {
        if (bounds[colons]) fail("expected ':' or ']' in a subscript");
        bounds[colons] = expression();
      }
    }
    next();  // ]
    if (colons == 0) {
      if (!bounds[0]) fail("an empty subscript []");
      auto index = node(Expr::Kind::Index, e->line);
      index->args.push_back(std::move(e));
      index->args.push_back(std::move(bounds[0]));
      return index;
    }
    auto slice = node(Expr::Kind::Slice, e->line);
    slice->args.push_back(std::move(e));
    for (auto& b : bounds) slice->args.push_back(std::move(b));
    return slice;
  }

  ExprPtr filter(ExprPtr input) {  // after "|"
    auto f = node(Expr::Kind::Filter, input->line, name());
    while (accept_op(".")) f->name += "." + name();
    f->args.push_back(std::move(input));
    if (accept_op("(")) call_arguments(*f);
    return f;
  }

  ExprPtr postfix_filters(ExprPtr e) {
    while (true) {
      if (accept_op("|")) {
        e = filter(std::move(e));
      } else if (accept_name("is")) {
        auto test = node(Expr::Kind::Test, e->line);
        test->negated = accept_name("not");
        test->name = name();
        test->args.push_back(std::move(e));
        if (accept_op("(")) {
          call_arguments(*test);
        } else if (peek().kind == TokenKind::String || peek().kind == TokenKind::Int ||
                   peek().kind == TokenKind::Float ||
                   (peek().kind == TokenKind::Name && !is_keyword(peek().text))) {
          test->names.emplace_back();
          test->args.push_back(postfix(primary()));  // `is sameas false`, `is divisibleby 3`
        }
        e = std::move(test);
      } else {
        return e;
      }
    }
  }

  static bool is_keyword(std::string_view n) {
    for (const char* k : {"and", "or", "not", "in", "is", "if", "else", "recursive"})
      if (n == k) return true;
    return false;
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace dsx::jinja
