/**
 * What the token tree keeps of the work registered under a token: a member told of a cancel and
 * of the retire, nothing more, held in the token's owner list (state.ts, invariant 5). What the
 * work is and how a stop treats it is owners.ts's (`Owner`).
 */

/** Work registered under a token, as the tree sees it. */
export interface TreeMember {
  /** Called right after the token (or an ancestor) is cancelled, from any thread, once. */
  onCancel?(): void;
  /** Called when the token retires with this member still registered. */
  onRetire?(): void;
}

/**
 * An entry of a token's owner list: registering and removing one is a few field writes, with no
 * hashing. Only the token it was added to writes the links.
 */
export interface OwnerEntry {
  ownerPrev: OwnerEntry | undefined;
  ownerNext: OwnerEntry | undefined;
  /** True while it is registered. */
  ownerLinked: boolean;
  /** The member this entry stands for; `undefined` for a member that is its own entry. */
  readonly owner?: TreeMember;
}
