/** The retrieval step of the chat pipeline: ranked passages from the knowledge base. */
import type { CancelSignal } from '../domain/cancel.js';
export interface Passage {
  documentId: string;
  chunkId: string;
  title: string;
  url: string | undefined;
  text: string;
  score: number;
  /** The PDF page the passage comes from. */
  page?: number;
}

export interface Retriever {
  /** Top-k passages for a query, best first, optionally within one collection. */
  retrieve(query: string, options: { topK: number; collection?: string }, signal?: CancelSignal): Promise<Passage[]>;
}
