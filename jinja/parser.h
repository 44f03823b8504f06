// Tokens to a template tree: Jinja's statements (if/elif/else, for with else and a filter, set,
// set blocks, macro, break/continue, generation, filter blocks) and expressions with Jinja's
// precedence. Error(Format) "line N: ..." names what was expected; include, import, extends,
// block and call are refused by name.
#pragma once

#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace dsx::jinja {

Body parse(const std::vector<Token>& tokens);

}  // namespace dsx::jinja
