"""A small stock-keeping module, half written: `make run` (spanfill demo) opens it in a headless
LSP session, types into the unfinished functions and prints the completions it gets."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Item:
    name: str
    price: float
    quantity: int = 0


def total_value(items: list[Item]) -> float:
    """Sum of price times quantity over all items."""
    total = 0.0
    for item in items:
        total += item.price * item.quantity
    return total


def find(items: list[Item], name: str) -> Item | None:
    """The first item called `name`, or None."""
    for item in items:
        if item.name == name:
            return item
    return None


def restock(items: list[Item], name: str, amount: int) -> Item:
    """Add `amount` to the quantity of the item called `name` and return it."""
    


def cheapest(items: list[Item]) -> Item | None:
    """The item with the lowest price, or None for an empty list."""
    


def report(items: list[Item]) -> str:
    lines = [f"{item.name}: {item.quantity} x {item.price:.2f}" for item in items]
    return "\n".join(lines + [f"total: {total_value(items):.2f}"])
