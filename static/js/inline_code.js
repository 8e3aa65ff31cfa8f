// Project descriptions are plain text; a span between backticks (`manage.py demo`) is shown as
// inline code. Only text nodes are split and every piece goes in through textContent, so nothing a
// description holds is ever read as markup. Runs on every element marked data-inline-code.

/** Replace each `code` span in the text nodes under `el` with a <code> element. */
export function renderInlineCode(el) {
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) texts.push(node);
  for (const node of texts) {
    const parts = node.data.split("`");
    if (parts.length < 3) continue; // no pair of backticks in this text
    const pieces = [];
    parts.forEach((part, i) => {
      // Odd pieces lie between a pair of backticks; an unpaired last backtick stays as written.
      const paired = i % 2 === 1 && i < parts.length - 1;
      if (paired && part) {
        const code = document.createElement("code");
        code.textContent = part;
        pieces.push(code);
      } else if (paired) {
        pieces.push(document.createTextNode("``")); // an empty pair stays as typed
      } else {
        pieces.push(document.createTextNode(i % 2 === 1 ? `\`${part}` : part));
      }
    });
    node.replaceWith(...pieces);
  }
}

for (const el of document.querySelectorAll("[data-inline-code]")) renderInlineCode(el);
