// Scroll following for the transcript: while the reader is at the end, new
// content keeps the end in view; once they scroll up, the view stays put and
// a "jump to latest" button appears. Sending a message always brings the new
// turn into view (follow(true)). Main thread only.
const SLACK_PX = 48;  // "at the end" tolerance

export class Follower {
  constructor(scroller, jumpButton) {
    this.scroller = scroller;
    this.jump = jumpButton;
    this.following = true;
    this.lastTop = 0;
    // Only a move up (the reader's doing: growth never lowers scrollTop)
    // stops following; reaching the end again resumes it.
    scroller.addEventListener("scroll", () => {
      const top = scroller.scrollTop;
      if (this.atEnd()) this.following = true;
      else if (top < this.lastTop - 2) this.following = false;
      this.lastTop = top;
      this.#showJump();
    }, { passive: true });
    jumpButton.addEventListener("click", () => this.follow(true));
  }

  atEnd() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight <= SLACK_PX;
  }

  // Content changed: keep the end in view when following.
  contentChanged() {
    if (this.following) this.#toEnd();
    this.#showJump();
  }

  // force: follow from now on (a new turn was sent, or the button pressed).
  follow(force) {
    if (force) this.following = true;
    if (this.following) this.#toEnd();
    this.#showJump();
  }

  #toEnd() {
    this.scroller.scrollTop = this.scroller.scrollHeight;
    this.lastTop = this.scroller.scrollTop;
  }

  #showJump() {
    this.jump.hidden = this.following || this.atEnd();
  }
}
