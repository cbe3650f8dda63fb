// The chat page served at `/` (runtime/src/serve/chat_page.html, compiled in
// by CMake so that the binary is all there is to deploy).
#ifndef LLMC_RUNTIME_SERVE_CHAT_PAGE_H_
#define LLMC_RUNTIME_SERVE_CHAT_PAGE_H_

namespace llmc::serve {

const char* ChatPageHtml();

}  // namespace llmc::serve

#endif  // LLMC_RUNTIME_SERVE_CHAT_PAGE_H_
