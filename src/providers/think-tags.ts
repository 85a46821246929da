/**
 * Separates `<think>…</think>` reasoning from answer text in a streamed reply. Tags may be split
 * across chunks at any byte, so a trailing fragment that could still become a tag is held back
 * until the next chunk decides it.
 */
export interface TaggedText {
  type: 'thinking' | 'delta';
  text: string;
}

/** Where pieces go: an array of them, or of any events they are one kind of. */
export interface PieceSink {
  push(piece: TaggedText): unknown;
}

const OPEN = '<think>';
const CLOSE = '</think>';

/** Length of the longest suffix of `text` that is a proper prefix of `tag`. */
function partialTagLength(text: string, tag: string): number {
  const max = Math.min(text.length, tag.length - 1);
  for (let length = max; length > 0; length--) {
    if (text.endsWith(tag.slice(0, length))) return length;
  }
  return 0;
}

/** Streaming splitter: push chunks, get thinking/answer pieces in order. */
export class ThinkTagSplitter {
  private inside = false;
  private held = '';

  /** Splits one chunk into `out` (returned); may hold back a possible partial tag at the end. */
  push<O extends PieceSink = TaggedText[]>(chunk: string, out: O = [] as unknown as O): O {
    // Every tag and every start of one begins with '<': text without it is one piece as it is.
    if (this.held.length === 0 && !chunk.includes('<')) {
      this.emit(out, chunk);
      return out;
    }
    let text = this.held + chunk;
    this.held = '';
    for (;;) {
      const tag = this.inside ? CLOSE : OPEN;
      const at = text.indexOf(tag);
      if (at === -1) {
        const keep = partialTagLength(text, tag);
        this.emit(out, text.slice(0, text.length - keep));
        this.held = text.slice(text.length - keep);
        return out;
      }
      this.emit(out, text.slice(0, at));
      this.inside = !this.inside;
      text = text.slice(at + tag.length);
    }
  }

  /** Releases whatever was held back when the stream ends, into `out` (returned). */
  flush<O extends PieceSink = TaggedText[]>(out: O = [] as unknown as O): O {
    this.emit(out, this.held);
    this.held = '';
    return out;
  }

  private emit(out: PieceSink, text: string): void {
    if (text.length === 0) return;
    out.push({ type: this.inside ? 'thinking' : 'delta', text });
  }
}
