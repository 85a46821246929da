/**
 * Which models' upstreams are cooling down on this node: a model whose upstream failed
 * `cooldown_after` times in a row is skipped for `cooldown_s`, so a dead upstream costs no
 * latency per request; once the time is up it is tried again (a success clears it, a failure
 * starts a new cool-down at once).
 */
import type { ModelConfig } from '../config/index.js';
import type { Clock } from '../domain/types.js';

interface ModelState {
  failures: number;
  until: number;
}

/** Consecutive failures and cool-downs per model, in memory. */
export class ModelCooldowns {
  private readonly states = new Map<string, ModelState>();

  constructor(private readonly clock: Clock = Date.now) {}

  /** When the model's cool-down ends (epoch ms), or undefined when it may be tried now. */
  coolingUntil(modelId: string): number | undefined {
    const state = this.states.get(modelId);
    return state && state.until > this.clock() ? state.until : undefined;
  }

  /** Records an upstream failure; the `cooldown_after`-th in a row (and every one after it) starts a cool-down. */
  failed(model: ModelConfig): void {
    const state = this.states.get(model.id) ?? { failures: 0, until: 0 };
    state.failures += 1;
    if (state.failures >= model.cooldownAfter) state.until = this.clock() + model.cooldownSeconds * 1000;
    this.states.set(model.id, state);
  }

  /** Records an answer: the model's failures are forgotten. */
  succeeded(modelId: string): void {
    this.states.delete(modelId);
  }
}
